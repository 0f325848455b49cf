package postgres

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends"
)

// startup is a StartupMessage with these parameters.
func startup(params ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, protocol3)
	for _, p := range params {
		body = append(append(body, p...), 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

func TestStartupCallerNamesAStandbyByItsApplicationName(t *testing.T) {
	all := []backends.Endpoint{{Name: Primary}, {Name: Standby}}
	sslRequest := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), 80877103)
	for _, tt := range []struct {
		name string
		head []byte
		want string
	}{
		{"walreceiver", startup("user", User, "database", "replication", "replication", "true", "application_name", Standby), Standby},
		{"a client", startup("user", User, "database", Database), ""},
		{"another application", startup("user", User, "application_name", "psql"), ""},
		{"TLS asked for first", sslRequest, ""},
		{"cut short", startup("user", User, "application_name", Standby)[:20], ""},
		{"not postgres", []byte("PING\r\n"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, StartupCaller(all)(tt.head))
		})
	}
}
