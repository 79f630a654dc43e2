package cli

// Health is `health`'s command line: `cloudrunner health`'s flags.
type Health struct {
	Socket    string
	URL       string
	TokenFile string
	Ready     bool
	Timeout   float64 // seconds
}

var healthSpec = spec{
	values:    []string{"--socket", "--url", "--token-file", "--timeout"},
	switches:  []string{"--ready"},
	exclusive: [][2]string{{"--socket", "--url"}},
}

// parseHealth reads the words after `health`; help is true for --help.
func parseHealth(words []string) (opts *Health, help bool, err error) {
	opts = &Health{Timeout: 5}
	_, help, err = scan(words, healthSpec, func(name, value string) error {
		switch name {
		case "--socket":
			opts.Socket = value
		case "--url":
			opts.URL = value
		case "--token-file":
			opts.TokenFile = value
		case "--timeout":
			return seconds(value, &opts.Timeout)
		case "--ready":
			opts.Ready = true
		}
		return nil
	})
	if err != nil || help {
		return nil, help, err
	}
	return opts, false, nil
}
