package config

// Parse parses and validates a cloud-config. name is used in messages
// (e.g. the file path). On any problem it returns a nil *Config and an
// error that lists every problem; errors.As(err, *Errors) works.
func Parse(name string, data []byte) (*Config, error) {
	p := &problems{file: name}
	cfg := decode(readRaw(data, p), p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}
