package settingstable

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/settings"
)

// Load fills the fields of the struct dst points to from the environment
// variables of scope's settings, read through getenv: each with the parser
// of its Kind. A field already set (not zero) keeps its value, so what code
// sets wins over the environment; unset variables leave fields zero (the
// default). A bad value is an error naming the variable and the value.
func Load(dst any, scope Scope, getenv func(string) string) error {
	v := reflect.ValueOf(dst).Elem()
	for _, s := range All {
		if s.For&scope == 0 || s.Env == "" || s.Field == "" {
			continue
		}
		raw := getenv(s.Env)
		if raw == "" {
			continue
		}
		f := v.FieldByName(s.Field)
		if !f.IsValid() {
			panic(fmt.Sprintf("settingstable: %s has no field %s", v.Type(), s.Field))
		}
		if !f.IsZero() {
			continue
		}
		if err := set(v, f, s, raw); err != nil {
			return fmt.Errorf("%s=%q: %w", s.Env, raw, err)
		}
	}
	return nil
}

var backoffType = reflect.TypeFor[func(int) time.Duration]()

// set parses raw by s.Kind into f (a field of v).
func set(v, f reflect.Value, s Setting, raw string) error {
	switch s.Kind {
	case String:
		f.SetString(raw)
	case List:
		var out []string
		for _, u := range strings.Split(raw, ",") {
			if u = strings.TrimSpace(u); u != "" {
				out = append(out, u)
			}
		}
		f.Set(reflect.ValueOf(out))
	case Duration:
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(d))
	case Int:
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 1 {
			return errors.New("want a positive integer")
		}
		f.SetInt(int64(n))
	case Pair:
		a, b, err := ParsePair(raw)
		if err != nil {
			return err
		}
		if f.Type() == backoffType {
			f.Set(reflect.ValueOf(settings.ExponentialBackoff(a, b)))
			return nil
		}
		f.Set(reflect.ValueOf(a))
		v.FieldByName(s.Field2).Set(reflect.ValueOf(b))
	case Switch:
		switch strings.ToLower(strings.TrimSpace(raw)) {
		case "on":
		case "off":
			f.SetBool(true)
		default:
			return errors.New("want on or off")
		}
	case Level:
		var level slog.Level
		if err := level.UnmarshalText([]byte(raw)); err != nil {
			return errors.New("want DEBUG, INFO, WARN or ERROR")
		}
		f.Set(reflect.ValueOf(lambdalog.New(os.Stderr, level)))
	case Counts:
		limits, err := ParseKindConcurrency(raw)
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(limits))
	case Rates:
		limits, err := ParseRateLimits(raw)
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(limits))
	default:
		panic(fmt.Sprintf("settingstable: %s has no parser", s.Env))
	}
	return nil
}

// ParsePair reads "A,B", two positive durations with A <= B.
func ParsePair(v string) (a, b time.Duration, err error) {
	first, second, ok := strings.Cut(v, ",")
	if !ok {
		return 0, 0, errors.New(`want two durations, "MIN,MAX"`)
	}
	if a, err = time.ParseDuration(strings.TrimSpace(first)); err != nil {
		return 0, 0, err
	}
	if b, err = time.ParseDuration(strings.TrimSpace(second)); err != nil {
		return 0, 0, err
	}
	if a <= 0 || b < a {
		return 0, 0, fmt.Errorf("want 0 < %s <= %s", a, b)
	}
	return a, b, nil
}
