package promclient

import "github.com/prometheus/common/model"

// Samples is an instant vector in a compact form: the labels of each sample
// are a short slice of name-value pairs, not a map, so decoding an answer of
// many samples allocates a few slabs rather than a map per sample. It holds
// what client_golang's model.Vector holds (Vector converts it). The label values
// of an answer are copied into shared chunks of a few KiB: a value kept for
// long keeps its chunk alive (strings.Clone it to keep it alone).
type Samples []Sample

// Sample is one sample of Samples.
type Sample struct {
	// Labels are the sample's labels in the answer's order. They are nil
	// when the answer gave the sample no "metric" (or a null one), empty
	// when it gave an empty one, as the model.Metric of a model.Sample.
	Labels    Labels
	Value     model.SampleValue
	Timestamp model.Time
	// Histogram is set for a native histogram sample (Value is then 0).
	Histogram *model.SampleHistogram
}

// Label is one label of a sample.
type Label struct {
	Name, Value string
}

// Labels are the labels of a sample. A name appears once in an answer from
// Prometheus; an answer that repeats one (which JSON allows) keeps every
// occurrence, and the last counts, as in the model.Metric decoded from it.
type Labels []Label

// Get returns the value of the label name, and whether the sample has it.
func (ls Labels) Get(name string) (string, bool) {
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].Name == name {
			return ls[i].Value, true
		}
	}
	return "", false
}

// Metric returns the labels as a model.Metric: nil for nil labels.
func (ls Labels) Metric() model.Metric {
	if ls == nil {
		return nil
	}
	m := make(model.Metric, len(ls))
	for _, l := range ls {
		m[model.LabelName(l.Name)] = model.LabelValue(l.Value)
	}
	return m
}

// Vector returns the samples as a model.Vector: what client_golang gives
// for the answer the samples were decoded from (nil for nil samples).
func (s Samples) Vector() model.Vector {
	if s == nil {
		return nil
	}
	vec := make(model.Vector, len(s))
	slab := make([]model.Sample, len(s))
	for i := range s {
		slab[i] = model.Sample{Metric: s[i].Labels.Metric(), Value: s[i].Value, Timestamp: s[i].Timestamp, Histogram: s[i].Histogram}
		vec[i] = &slab[i]
	}
	return vec
}
