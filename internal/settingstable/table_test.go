package settingstable

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/settings"
)

func TestTableIsConsistent(t *testing.T) {
	fields, envs := map[string]bool{}, map[string]bool{}
	for _, s := range All {
		if s.Field == "" && s.Env == "" && s.Const == "" {
			t.Errorf("a setting has neither field, variable nor constant: %+v", s)
		}
		if s.Const != "" && (s.Field != "" || s.Env != "" || s.Default == nil) {
			t.Errorf("constant %s: a fixed setting has no field and no variable, and a typed default", s.Const)
		}
		if s.Const != "" {
			// The docs name it settings.Default().<Const>: that field must
			// exist and hold the default the table shows.
			f := reflect.ValueOf(settings.Default()).FieldByName(s.Const)
			if !f.IsValid() || f.Interface() != s.Default {
				t.Errorf("constant %s: settings.Default().%s is not the table's default %v", s.Const, s.Const, s.Default)
			}
		}
		if s.Field != "" && fields[s.Field] {
			t.Errorf("field %s is in the table twice", s.Field)
		}
		if s.Env != "" && envs[s.Env] {
			t.Errorf("variable %s is in the table twice", s.Env)
		}
		if s.Env != "" && !strings.HasPrefix(s.Env, "LEASEHOLD_") {
			t.Errorf("variable %s lacks the LEASEHOLD_ prefix", s.Env)
		}
		fields[s.Field], envs[s.Env] = true, true
		if s.Doc == "" || s.For == 0 {
			t.Errorf("%s %s: no doc or no scope", s.Field, s.Env)
		}
		if (s.Kind == Pair) != (s.Default != nil && reflect.TypeOf(s.Default) == reflect.TypeFor[[2]time.Duration]()) && s.Default != nil {
			t.Errorf("%s: a pair's default is a [2]time.Duration", s.Field)
		}
	}
}

func TestLoad(t *testing.T) {
	var cfg struct {
		Table                 string
		QueueURLs             []string
		LeaseDuration         time.Duration
		MaxAttempts           int
		Backoff               func(int) time.Duration
		UnknownKindBackoffMin time.Duration
		UnknownKindBackoffMax time.Duration
		Unlisted              bool
	}
	cfg.MaxAttempts = 3 // set by code: the environment does not override it
	env := map[string]string{
		settings.EnvTable: "tasks", settings.EnvServeQueueURLs: " a, ,b", settings.EnvLeaseDuration: "30s",
		settings.EnvMaxAttempts: "7", settings.EnvBackoff: "1s,2s", settings.EnvUnknownKindBackoff: "1s,1m",
		settings.EnvListing: "off",
	}
	if err := Load(&cfg, Worker, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.Table != "tasks" || !reflect.DeepEqual(cfg.QueueURLs, []string{"a", "b"}) || cfg.LeaseDuration != 30*time.Second ||
		cfg.MaxAttempts != 3 || cfg.Backoff == nil || cfg.UnknownKindBackoffMin != time.Second || cfg.UnknownKindBackoffMax != time.Minute || !cfg.Unlisted {
		t.Errorf("Load: %+v", cfg)
	}
	for k, v := range map[string]string{
		settings.EnvLeaseDuration: "soon", settings.EnvMaxAttempts: "0", settings.EnvBackoff: "2s,1s", settings.EnvListing: "maybe",
	} {
		var c struct {
			LeaseDuration time.Duration
			MaxAttempts   int
			Backoff       func(int) time.Duration
			Unlisted      bool
		}
		err := Load(&c, Worker, func(n string) string {
			if n == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: error %v, want one naming the variable", k, v, err)
		}
	}
}
