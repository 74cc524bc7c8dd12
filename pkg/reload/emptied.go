package reload

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

// ErrRulesEmptied is wrapped by the error a Watcher reports (Config.Report)
// when a reload takes the configuration from some rules to none: a
// truncated file, a comment-only file, a directory emptied, as an
// accidentally emptied ConfigMap key does. The reload is refused unless
// Config.AllowEmptyRules is set; either way it is reported.
var ErrRulesEmptied = errors.New("the reload leaves no rule")

// emptiedOutcomes are the outcome label values of
// promscaler_config_rules_emptied_total.
const (
	emptiedRefused = "refused"
	emptiedApplied = "applied"
)

// emptiedCounter is promscaler_config_rules_emptied_total{outcome}.
func emptiedCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "promscaler",
		Name:      "config_rules_emptied_total",
		Help:      "Reloads that would take the configuration from some rules to none, by outcome: refused (the rules in service stay) or applied (--allow-empty-rules-reload).",
	}, []string{"outcome"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("config reload: registering its metric: %w", err)
	}
	for _, o := range []string{emptiedRefused, emptiedApplied} {
		c.WithLabelValues(o)
	}
	return c, nil
}

// countRules counts the rules of files (custom, external, externalQueries
// entries, and a resourceRules block as one); ok is false when a file does
// not parse (the apply function refuses it and reports why).
func countRules(files []rules.File) (n int, ok bool) {
	for _, f := range files {
		cfg, err := config.Parse(f.Data, f.Path)
		if err != nil {
			return 0, false
		}
		n += len(cfg.Rules) + len(cfg.ExternalRules) + len(cfg.ExternalQueries)
		if cfg.ResourceRules != nil {
			n++
		}
	}
	return n, true
}

// checkEmptied is the guard of a reload from some rules to none: nil when
// next keeps a rule (or the rules in service are none or unknown), else an
// error wrapping ErrRulesEmptied, reported and counted here. refuse says
// whether the reload must be refused (AllowEmptyRules unset).
func (w *Watcher) checkEmptied(next []rules.File, changed string) (refuse bool, err error) {
	n, ok := countRules(next)
	if !ok || n > 0 || w.rulesInService <= 0 {
		return false, nil
	}
	if !w.allowEmpty {
		w.emptied.WithLabelValues(emptiedRefused).Inc()
		return true, fmt.Errorf("%w: %d rules in service, none after this change (pass --allow-empty-rules-reload to allow it)", ErrRulesEmptied, w.rulesInService)
	}
	w.emptied.WithLabelValues(emptiedApplied).Inc()
	err = fmt.Errorf("%w: configuration file %s changed, the %d rules in service are removed (allowed by --allow-empty-rules-reload): every metric answers 404", ErrRulesEmptied, changed, w.rulesInService)
	return false, err
}
