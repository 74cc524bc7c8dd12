package framework

// NewCA creates a certificate authority (<dir>/<name>.crt, its key kept in
// memory) beside the environment's own, for tests that rotate a CA bundle.
func NewCA(dir, name string) (*CA, error) { return newCA(dir, name) }
