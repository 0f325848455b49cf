package results

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestZZShot(t *testing.T) {
	p := os.Getenv("SHOT_REPORT")
	if p == "" {
		t.Skip()
	}
	b := newBrowser(t)
	b.do(t, chromedp.Navigate("file://"+p), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))
	t.Log(eval[float64](t, b, `performance.getEntriesByType('navigation')[0].loadEventEnd`))
	b.screenshot(t, "real60.png")
	b.do(t, chromedp.Click(chromedp.CSS(`a[href="#tl-resource-1"]`)))
	b.screenshot(t, "real60-zoom.png")
}
