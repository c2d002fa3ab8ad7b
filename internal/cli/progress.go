package cli

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// bar is a progress bar on stderr, drawn only when stderr is a terminal; on
// anything else its methods do nothing and the commands print a plain
// summary instead. It starts no goroutine (its length is always known).
type bar struct {
	pb *progressbar.ProgressBar
}

func (a *app) newBar(total int, description string) *bar {
	if !a.io.ErrIsTerminal {
		return &bar{}
	}
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(a.io.Err),
		progressbar.OptionSetDescription(description),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionFullWidth(),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)}
}

// set moves the bar to done.
func (b *bar) set(done int) {
	if b.pb != nil {
		_ = b.pb.Set(done)
	}
}

// describe changes the text before the bar.
func (b *bar) describe(text string) {
	if b.pb != nil {
		b.pb.Describe(text)
	}
}

// resize changes the total.
func (b *bar) resize(total int) {
	if b.pb != nil {
		b.pb.ChangeMax(total)
	}
}

// finish completes and clears the bar.
func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
