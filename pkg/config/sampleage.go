package config

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/truncate"
)

// ParseMaxSampleAge parses a maxSampleAge: a positive Prometheus duration
// ("30s", "2m"); "" is 0, the backend's.
func ParseMaxSampleAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be positive")
	}
	return time.Duration(d), nil
}

func (ch *checker) maxSampleAge(path, v string) {
	if _, err := ParseMaxSampleAge(v); err != nil {
		ch.errorf(path, `a Prometheus duration, e.g. "30s", "2m"`, "maxSampleAge %q: %v", truncate.String(v, 40), err)
	}
}
