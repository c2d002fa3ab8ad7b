package settingstable

import (
	"fmt"
	"strings"
)

// Markdown renders scope's settings as the table the docs show: field,
// environment variable, default, meaning.
func Markdown(scope Scope) string {
	var b strings.Builder
	b.WriteString("| field | env var | default | meaning |\n|---|---|---|---|\n")
	for _, s := range All {
		if s.For&scope == 0 {
			continue
		}
		field, env := "—", "—"
		if s.Field != "" {
			field = "`" + s.Field + "`"
			if s.Field2 != "" {
				field += ", `" + s.Field2 + "`"
			}
		}
		if s.Const != "" {
			field = "fixed: `settings.Default()." + s.Const + "`"
		}
		if s.Env != "" {
			env = "`" + s.Env + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", field, env, s.DefaultOf(), s.Doc)
	}
	return b.String()
}

// Markers delimit a generated table in a doc: Begin(name), the table, End.
func Begin(name string) string {
	return "<!-- settings:" + name + " (generated from internal/settingstable; go test ./internal/settingstable -update rewrites it) -->"
}

// End closes a generated table.
const End = "<!-- end settings -->"
