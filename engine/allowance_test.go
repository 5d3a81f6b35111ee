package engine

import "testing"

func TestAllowanceCheck(t *testing.T) {
	al := Allowance{Fields: []string{"tools", "service_tier"}, Betas: []string{"context-*"}}
	for _, tt := range []struct {
		fields, betas []string
		code          string
	}{
		{nil, nil, ""},
		{[]string{"tools.web_search"}, nil, ""},
		{[]string{"service_tier"}, []string{"context-1m-2025"}, ""},
		{[]string{"toolsy"}, nil, "field_not_allowed"},
		{nil, []string{"files-api"}, "beta_not_allowed"},
	} {
		e := al.Check("ch", "m", tt.fields, tt.betas)
		switch {
		case tt.code == "" && e != nil:
			t.Errorf("%v %v refused: %s", tt.fields, tt.betas, e.Message)
		case tt.code != "" && (e == nil || e.Code != tt.code):
			t.Errorf("%v %v: %v, want %s", tt.fields, tt.betas, e, tt.code)
		}
	}
}
