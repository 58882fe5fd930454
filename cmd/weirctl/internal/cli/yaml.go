package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// writeYAML prints v as one YAML document with the same keys, key order and
// values as its JSON encoding. Going through JSON means the structs need no
// yaml tags and custom MarshalJSON methods (and json.RawMessage documents
// relayed from the broker) come out the same in both formats.
func writeYAML(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding output: %w", err)
	}
	node, err := yamlNodeFromJSON(data)
	if err != nil {
		return fmt.Errorf("converting output to YAML: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2) // the width WriteJSON indents with
	if err := enc.Encode(node); err != nil {
		return fmt.Errorf("writing YAML: %w", err)
	}
	return enc.Close()
}

// yamlNodeFromJSON builds the YAML tree from JSON tokens instead of decoding
// into map[string]any, which would sort every object's keys alphabetically
// and bury fields like "status" in the middle of the document.
func yamlNodeFromJSON(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keeps 1798761600 an integer, not 1.7987616e+09
	return yamlValue(dec)
}

func yamlValue(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return yamlCollection(dec, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, true)
		case '[':
			return yamlCollection(dec, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}, false)
		}
		return nil, fmt.Errorf("unexpected %q", t)
	case string:
		// The explicit !!str tag makes the encoder quote strings that
		// would otherwise read back as another type ("true", "123", "").
		return yamlScalar("!!str", t), nil
	case json.Number:
		s := t.String()
		if strings.ContainsAny(s, ".eE") {
			return yamlScalar("!!float", s), nil
		}
		return yamlScalar("!!int", s), nil
	case bool:
		return yamlScalar("!!bool", strconv.FormatBool(t)), nil
	case nil:
		return yamlScalar("!!null", "null"), nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// yamlCollection reads the members of an object (key, value pairs) or an
// array up to and including its closing delimiter.
func yamlCollection(dec *json.Decoder, n *yaml.Node, isObject bool) (*yaml.Node, error) {
	for dec.More() {
		if isObject {
			key, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := key.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", key)
			}
			n.Content = append(n.Content, yamlScalar("!!str", k))
		}
		v, err := yamlValue(dec)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, v)
	}
	if _, err := dec.Token(); err != nil { // the closing } or ]
		return nil, err
	}
	return n, nil
}

func yamlScalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
