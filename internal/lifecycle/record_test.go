package lifecycle

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestExecutionRecordShape: the per-message record keeps at most 15
// fields, none of them an any (the states hand each other typed values,
// issue 34), and stays within 2,040 bytes: with the allocator's 8-byte
// header that is the 2,048-byte size class (BenchmarkProcessInline's
// bytes per message).
func TestExecutionRecordShape(t *testing.T) {
	const maxFields, maxBytes = 15, 2040
	rt := reflect.TypeOf(execution{})
	if rt.NumField() > maxFields {
		t.Errorf("execution has %d fields, more than %d: put what only some states use in a sub-record they own", rt.NumField(), maxFields)
	}
	var walk func(path string, rt reflect.Type, depth int)
	walk = func(path string, rt reflect.Type, depth int) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Type.Kind() == reflect.Interface && f.Type.NumMethod() == 0 {
				t.Errorf("%s.%s is an any: hand the next state a typed value", path, f.Name)
			}
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == rt.PkgPath() && depth < 2 {
				walk(path+"."+f.Name, f.Type, depth+1)
			}
		}
	}
	walk("execution", rt, 0)
	if size := unsafe.Sizeof(execution{}); size > maxBytes {
		t.Errorf("execution is %d bytes, more than %d: it moves to a larger size class", size, maxBytes)
	}
}
