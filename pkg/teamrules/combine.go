package teamrules

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/promscaler/promscaler/pkg/rules"
)

// Combiner joins the cluster-wide rules (the --config files) and the
// team rules into the one rule set served, and publishes it on every
// change. The teams' rules come first, in ConfigMap key order, the files'
// last: of two rules producing the same metric in a namespace, the
// cluster-wide one wins (see rules.Rule.Order), so a team cannot shadow
// an administrator's metric. It implements Sink.
type Combiner struct {
	publish func(*rules.RuleSet)

	mu    sync.Mutex
	base  *rules.RuleSet
	teams map[string]*rules.RuleSet
}

var _ Sink = (*Combiner)(nil)

// NewCombiner returns a Combiner serving base alone until teams are set;
// publish receives each new combined set (it does not receive base).
func NewCombiner(base *rules.RuleSet, publish func(*rules.RuleSet)) *Combiner {
	return &Combiner{publish: publish, base: base, teams: map[string]*rules.RuleSet{}}
}

// SetBase installs new cluster-wide rules with the teams' rules in service.
func (c *Combiner) SetBase(rs *rules.RuleSet) error {
	if rs == nil {
		return errors.New("no rules")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	merged, err := combine(rs, c.teams)
	if err != nil {
		return err
	}
	c.base = rs
	c.publish(merged)
	return nil
}

// SetTeam implements Sink.
func (c *Combiner) SetTeam(key string, rs *rules.RuleSet) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	teams := maps.Clone(c.teams)
	if rs == nil {
		delete(teams, key)
	} else {
		teams[key] = rs
	}
	merged, err := combine(c.base, teams)
	if err != nil {
		return err
	}
	c.teams = teams
	c.publish(merged)
	return nil
}

func combine(base *rules.RuleSet, teams map[string]*rules.RuleSet) (*rules.RuleSet, error) {
	if len(teams) == 0 {
		return base, nil
	}
	sets := make([]*rules.RuleSet, 0, len(teams)+1)
	for _, k := range slices.Sorted(maps.Keys(teams)) {
		sets = append(sets, teams[k])
	}
	return rules.Merge(append(sets, base))
}
