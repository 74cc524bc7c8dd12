package config

import (
	"fmt"
	"strings"
	"testing"
)

// defineBomb is the team ConfigMap of issue 32: a chain of define
// templates, each calling the previous one twice (2^depth calls, empty
// output), used by the query; guard wraps the use (e.g. an if that is
// false for validation's sample data).
func defineBomb(depth int, guard string) string {
	var b strings.Builder
	b.WriteString(`<<define "t0">><<end>>`)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, `<<define "t%d">><<template "t%d">><<template "t%d">><<end>>`, i, i-1, i-1)
	}
	use := fmt.Sprintf(`<<template "t%d">>`, depth)
	if guard != "" {
		use = "<<if " + guard + ">>" + use + "<<end>>"
	}
	return b.String() + `sum(<<.Series>>{<<.LabelMatchers>>})` + use
}

func TestTemplateBounds(t *testing.T) {
	tests := []struct {
		name, text string
		wantErr    string // "" accepted
	}{
		{name: "define bomb", text: defineBomb(16, ""), wantErr: "more than 1000 template calls"},
		{name: "define bomb of issue 32", text: defineBomb(60, ""), wantErr: "more than 1000 template calls"},
		{name: "bomb guarded to run at request time only", text: defineBomb(40, `eq .Series "never_in_validation"`), wantErr: "more than 1000 template calls"},
		{name: "bomb defined but never called", text: strings.TrimSuffix(defineBomb(40, ""), `<<template "t40">>`)},
		{name: "chain within the bound", text: defineBomb(8, "")}, // 510 calls
		{name: "two nested ranges", text: `<<range .GroupBySlice>><<range $.GroupBySlice>><<.>><<end>><<end>>sum(x)`},
		{name: "three nested ranges through a call", text: `<<define "r">><<range $.GroupBySlice>><<range $.GroupBySlice>>x<<end>><<end>><<end>>` +
			`<<range .GroupBySlice>><<template "r" $>><<end>>sum(x)`, wantErr: "nests 3 ranges"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseQueryTemplate("metricsQuery", tt.text)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}
