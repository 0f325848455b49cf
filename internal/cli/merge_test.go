package cli

import (
	"testing"
)

func TestMergeBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	empty := t.TempDir()
	assertRefused(t, store, []string{"merge", "--out", store}, []badInput{
		{"no comparison or soak in it", []string{empty}, empty + " holds no comparison, soak or sweep (no compare.json, soak.json or sweep.json in it or its folders)"},
		{"no such folder", []string{empty + "/nope"}, "no such file or directory"},
	})
}
