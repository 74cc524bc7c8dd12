package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezones without the host's zoneinfo (distroless images)

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/promscaler/promscaler/internal/yamlpath"
)

// file is the schedules file as written (docs/autoscaler.md, "Schedules").
type file struct {
	Schedules []schedule `yaml:"schedules"`
}

type schedule struct {
	Name       string   `yaml:"name"`
	Namespaces []string `yaml:"namespaces"`
	Timezone   string   `yaml:"timezone"`
	Windows    []window `yaml:"windows"`
}

type window struct {
	Days      []string `yaml:"days"`
	Start     string   `yaml:"start"`
	End       string   `yaml:"end"`
	StartTime string   `yaml:"startTime"`
	EndTime   string   `yaml:"endTime"`
	Replicas  *int32   `yaml:"replicas"`
	RampUp    string   `yaml:"rampUp"`
	RampDown  string   `yaml:"rampDown"`
}

// MaxRamp bounds rampUp and rampDown.
const MaxRamp = 24 * time.Hour

var (
	metricName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_:.\-]*$`)
	timeOfDay  = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)
	weekdays   = map[string]time.Weekday{"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday,
		"Wed": time.Wednesday, "Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday}
)

// Parse reads a schedules file. Decoding is strict (an unknown key is an
// error); every problem is reported at once, each as FILE:LINE: field:
// message.
func Parse(name string, data []byte) (*Set, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	set, errs := build(f)
	if len(errs) == 0 {
		return set, nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = fmt.Sprintf("%s:%d: %s", name, line(&root, e.Field), e.Error())
	}
	return nil, errors.New(strings.Join(msgs, "\n"))
}

// build validates the decoded file into a Set.
func build(f file) (*Set, field.ErrorList) {
	var errs field.ErrorList
	set := &Set{schedules: map[string]*Schedule{}}
	for i, s := range f.Schedules {
		p := field.NewPath("schedules").Index(i)
		switch {
		case !metricName.MatchString(s.Name):
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, "an external metric name: letters, digits, _ : . - (not starting with a digit)"))
		case set.schedules[s.Name] != nil:
			errs = append(errs, field.Duplicate(p.Child("name"), s.Name))
		}
		sc := &Schedule{Name: s.Name, Namespaces: s.Namespaces, Location: time.UTC}
		if s.Timezone != "" {
			loc, err := time.LoadLocation(s.Timezone)
			if err != nil {
				errs = append(errs, field.Invalid(p.Child("timezone"), s.Timezone, "not an IANA timezone (e.g. Europe/Paris, UTC)"))
			} else {
				sc.Location = loc
			}
		}
		if len(s.Windows) == 0 {
			errs = append(errs, field.Required(p.Child("windows"), "at least one window"))
		}
		for j, w := range s.Windows {
			win, werrs := buildWindow(w, p.Child("windows").Index(j))
			errs = append(errs, werrs...)
			sc.Windows = append(sc.Windows, win)
		}
		set.schedules[s.Name] = sc
		set.names = append(set.names, s.Name)
	}
	return set, errs
}

// buildWindow validates one window.
func buildWindow(w window, p *field.Path) (Window, field.ErrorList) {
	var errs field.ErrorList
	var out Window
	switch {
	case w.Replicas == nil:
		errs = append(errs, field.Required(p.Child("replicas"), "the floor inside the window"))
	case *w.Replicas < 1:
		errs = append(errs, field.Invalid(p.Child("replicas"), *w.Replicas, "must be at least 1"))
	default:
		out.Replicas = *w.Replicas
	}
	out.RampUp, errs = ramp1(w.RampUp, p.Child("rampUp"), errs)
	out.RampDown, errs = ramp1(w.RampDown, p.Child("rampDown"), errs)
	oneOff := w.StartTime != "" || w.EndTime != ""
	repeating := w.Start != "" || w.End != "" || len(w.Days) > 0
	switch {
	case oneOff && repeating:
		errs = append(errs, field.Forbidden(p, "either startTime/endTime (one-off) or days/start/end (repeating), not both"))
	case oneOff:
		out.OneOff = true
		out.From, errs = instant(w.StartTime, p.Child("startTime"), errs)
		out.To, errs = instant(w.EndTime, p.Child("endTime"), errs)
		if !out.From.IsZero() && !out.To.IsZero() && !out.To.After(out.From) {
			errs = append(errs, field.Invalid(p.Child("endTime"), w.EndTime, "must be after startTime"))
		}
	default:
		out.Start, errs = hhmm(w.Start, p.Child("start"), errs)
		out.End, errs = hhmm(w.End, p.Child("end"), errs)
		for k, d := range w.Days {
			wd, ok := weekdays[d]
			if !ok {
				errs = append(errs, field.NotSupported(p.Child("days").Index(k), d, []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}))
			}
			out.Days = append(out.Days, wd)
		}
	}
	return out, errs
}

func ramp1(v string, p *field.Path, errs field.ErrorList) (time.Duration, field.ErrorList) {
	if v == "" {
		return 0, errs
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, append(errs, field.Invalid(p, v, "not a duration (e.g. 10m, 1h30m)"))
	case d < 0 || d > MaxRamp:
		return 0, append(errs, field.Invalid(p, v, "must be within 0 and 24h"))
	}
	return d, errs
}

func instant(v string, p *field.Path, errs field.ErrorList) (time.Time, field.ErrorList) {
	if v == "" {
		return time.Time{}, append(errs, field.Required(p, "an RFC 3339 time, e.g. 2026-12-24T18:00:00+01:00"))
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, append(errs, field.Invalid(p, v, "not an RFC 3339 time, e.g. 2026-12-24T18:00:00+01:00"))
	}
	return t, errs
}

func hhmm(v string, p *field.Path, errs field.ErrorList) (time.Duration, field.ErrorList) {
	m := timeOfDay.FindStringSubmatch(v)
	if m == nil {
		return 0, append(errs, field.Invalid(p, v, "a local time of day HH:MM (00:00 to 23:59)"))
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	return time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute, errs
}

// line is the line of the field at path (a field.Path string such as
// "schedules[0].windows[1].start") in the YAML tree, or of the closest
// enclosing field found.
func line(root *yaml.Node, path string) int {
	if l := yamlpath.Line(root, path); l > 0 {
		return l
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Line
}

// Decode reads a list of schedules given as JSON (or YAML), as a
// `schedules:` key of another document holds it (an `autoscaler simulate`
// scenario). Each problem is an error starting with its field path
// (schedules[0].windows[1].start: ...), for the caller to place.
func Decode(list []byte) (*Set, []error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(append([]byte("schedules: "), list...)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, []error{fmt.Errorf("schedules: %w", err)}
	}
	set, errs := build(f)
	if len(errs) > 0 {
		return nil, errs.ToAggregate().Errors()
	}
	return set, nil
}
