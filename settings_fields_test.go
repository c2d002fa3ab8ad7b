package leasehold

import (
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/settings"
)

// Every row of the settings table names a field that its configs have, of
// the type its variable's parser fills: the table, the configs and the
// environment cannot drift apart.
func TestSettingsTableNamesConfigFields(t *testing.T) {
	configs := map[settingstable.Scope]reflect.Type{
		settingstable.Worker:   reflect.TypeFor[WorkerConfig](),
		settingstable.Client:   reflect.TypeFor[ClientConfig](),
		settingstable.Dispatch: reflect.TypeFor[dispatch.Settings](),
	}
	d := reflect.TypeFor[time.Duration]()
	kinds := map[settingstable.Kind][]reflect.Type{
		settingstable.String:   {reflect.TypeFor[string]()},
		settingstable.List:     {reflect.TypeFor[[]string]()},
		settingstable.Duration: {d},
		settingstable.Int:      {reflect.TypeFor[int]()},
		settingstable.Pair:     {reflect.TypeFor[func(int) time.Duration](), d},
		settingstable.Switch:   {reflect.TypeFor[bool]()},
		settingstable.Level:    {reflect.TypeFor[*slog.Logger]()},
		settingstable.Rates:    {reflect.TypeFor[map[string]settings.RateLimit]()},
		settingstable.Counts:   {reflect.TypeFor[map[string]int]()},
	}
	// Fields only code sets: their types.
	codeOnly := map[string]reflect.Type{
		"Metrics": reflect.TypeFor[io.Writer](), "Clock": reflect.TypeFor[clockwork.Clock](),
	}
	checked := 0
	for _, s := range settingstable.All {
		if s.Field == "" {
			continue
		}
		for scope, typ := range configs {
			if s.For&scope == 0 {
				continue
			}
			for _, name := range []string{s.Field, s.Field2} {
				if name == "" {
					continue
				}
				f, ok := typ.FieldByName(name)
				if !ok {
					t.Errorf("%s (%s) names %s.%s, which does not exist", s.Field, s.Env, typ, name)
					continue
				}
				checked++
				switch want, ok := codeOnly[name]; {
				case ok:
					if f.Type != want {
						t.Errorf("%s.%s is a %s, want %s", typ, name, f.Type, want)
					}
				case s.Env != "":
					if !slices.Contains(kinds[s.Kind], f.Type) {
						t.Errorf("%s.%s is a %s, which %s's kind cannot fill (want one of %v)", typ, name, f.Type, s.Env, kinds[s.Kind])
					}
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d fields; the walk is broken", checked)
	}
}
