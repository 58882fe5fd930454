package kafka

// The seed corpus of FuzzRequestFrame and FuzzDecodeRequest: a valid
// request of every API the server serves, at its lowest and highest
// version, encoded by kmsg. TestFuzzSeedCorpusCurrent fails when the
// files in testdata/fuzz differ from what apis.go implies, and rewrites
// them when WEIR_UPDATE_FUZZ_CORPUS=1.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log/logtest"
)

// updateCorpusEnv names the variable that makes TestFuzzSeedCorpusCurrent
// rewrite the seed corpus.
const updateCorpusEnv = "WEIR_UPDATE_FUZZ_CORPUS"

// seedPrefix starts the names of generated seed files; other files in
// the corpus directories (inputs that once failed, kept as regression
// tests) are left alone.
const seedPrefix = "seed-"

// seedCorrelationID is the correlation ID of the seed requests.
const seedCorrelationID = 7

func TestFuzzSeedCorpusCurrent(t *testing.T) {
	update := os.Getenv(updateCorpusEnv) == "1"
	for target, files := range seedCorpus(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		if update {
			if err := writeSeeds(dir, files); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, problem := range staleSeeds(t, dir, files) {
			t.Errorf("%s: %s", dir, problem)
		}
	}
	if t.Failed() {
		t.Logf("regenerate with: %s=1 go test -run '^TestFuzzSeedCorpusCurrent$' ./kafka/", updateCorpusEnv)
	}
}

// TestSeedRequestsDecode: every seed is a request the server reads (the
// frame seeds run through the same reading as the server's), so fuzzing
// starts from inputs that reach the handlers.
func TestSeedRequestsDecode(t *testing.T) {
	apis := (&Server{}).newAPITable()
	for _, a := range apis {
		if a.name == "" {
			continue
		}
		for _, v := range seedVersions(a) {
			req := seedRequest(a.key, v)
			body := req.AppendTo(nil)
			again := kmsg.RequestForKey(a.key)
			again.SetVersion(v)
			if err := again.ReadFrom(body); err != nil {
				t.Errorf("%s v%d: seed does not decode: %v", a.name, v, err)
			}
			frame := encodeRequest(req, seedCorrelationID)
			want, closes := expectedReplies(apis, frame)
			if closes || (len(want) != 1 && !isAcksZero(req)) {
				t.Errorf("%s v%d: seed frame expects %d responses and closing %v, want 1 and not closing", a.name, v, len(want), closes)
			}
		}
	}
}

func isAcksZero(req kmsg.Request) bool {
	p, ok := req.(*kmsg.ProduceRequest)
	return ok && p.Acks == 0
}

// seedCorpus returns, per fuzz target, each seed file's name and content.
func seedCorpus(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	frames := map[string][]byte{}
	decodes := map[string][]byte{}
	for _, a := range (&Server{}).newAPITable() {
		if a.name == "" {
			continue
		}
		for _, v := range seedVersions(a) {
			req := seedRequest(a.key, v)
			name := fmt.Sprintf("%s%s-v%d", seedPrefix, a.name, v)
			frames[name] = corpusFile(encodeRequest(req, seedCorrelationID))
			decodes[name] = corpusFile(a.key, v, req.AppendTo(nil))
		}
	}
	return map[string]map[string][]byte{"FuzzRequestFrame": frames, "FuzzDecodeRequest": decodes}
}

// seedVersions is an API's lowest and highest served versions.
func seedVersions(a api) []int16 {
	if a.min == a.max {
		return []int16{a.min}
	}
	return []int16{a.min, a.max}
}

// corpusFile encodes one input in Go's fuzz corpus format.
func corpusFile(values ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case int16:
			fmt.Fprintf(&b, "int16(%d)\n", v)
		default:
			panic(fmt.Sprintf("corpus value of type %T", v))
		}
	}
	return b.Bytes()
}

// writeSeeds makes dir's seed files exactly files.
func writeSeeds(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("corpus directory: %w", err)
	}
	existing, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("corpus directory: %w", err)
	}
	for _, e := range existing {
		if _, keep := files[e.Name()]; strings.HasPrefix(e.Name(), seedPrefix) && !keep {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("removing a stale seed: %w", err)
			}
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return fmt.Errorf("writing a seed: %w", err)
		}
	}
	return nil
}

// staleSeeds lists how dir's seed files differ from files.
func staleSeeds(t *testing.T, dir string, files map[string][]byte) []string {
	t.Helper()
	var problems []string
	existing, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range existing {
		if _, want := files[e.Name()]; strings.HasPrefix(e.Name(), seedPrefix) && !want {
			problems = append(problems, e.Name()+" is not a request the server serves")
		}
	}
	for name, content := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case os.IsNotExist(err):
			problems = append(problems, name+" is missing")
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(got, content):
			problems = append(problems, name+" is out of date")
		}
	}
	slices.Sort(problems)
	return problems
}

// seedRequest is a valid request of key at version: kmsg's defaults, one
// element in every array, "fuzz" in every string and byte field, then the
// values a handler needs to get past its first check (a topic config
// that exists, a record batch that validates, ...).
func seedRequest(key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(key) // with kmsg's defaults
	fillSeed(reflect.ValueOf(req).Elem())
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Acks, r.TimeoutMillis, r.TransactionID = -1, 5000, nil
	case *kmsg.FetchRequest:
		r.MaxWaitMillis, r.ClusterID = 0, nil
		r.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 20
	case *kmsg.ListOffsetsRequest:
		r.Topics[0].Partitions[0].Timestamp = -1 // latest
	case *kmsg.InitProducerIDRequest:
		r.TransactionalID = nil
	case *kmsg.JoinGroupRequest:
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = 30000, 30000, "consumer"
	case *kmsg.CreateTopicsRequest:
		r.Topics[0].ReplicaAssignment = nil
		r.Topics[0].Configs[0].Name, r.Topics[0].Configs[0].Value = "retention.ms", kmsg.StringPtr("60000")
	case *kmsg.CreatePartitionsRequest:
		r.Topics[0].Count, r.Topics[0].Assignment = 2, nil
	case *kmsg.DescribeConfigsRequest:
		r.Resources[0].ResourceType, r.Resources[0].ConfigNames = kmsg.ConfigResourceTypeTopic, []string{"retention.ms"}
	case *kmsg.AlterConfigsRequest:
		r.Resources[0].ResourceType = kmsg.ConfigResourceTypeTopic
		r.Resources[0].Configs[0].Name, r.Resources[0].Configs[0].Value = "retention.ms", kmsg.StringPtr("60000")
	case *kmsg.IncrementalAlterConfigsRequest:
		r.Resources[0].ResourceType = kmsg.ConfigResourceTypeTopic
		r.Resources[0].Configs[0].Name, r.Resources[0].Configs[0].Value = "retention.ms", kmsg.StringPtr("60000")
		r.Resources[0].Configs[0].Op = kmsg.IncrementalAlterConfigOpSet
	case *kmsg.SASLHandshakeRequest:
		r.Mechanism = "PLAIN"
	case *kmsg.CreateACLsRequest:
		c := &r.Creations[0]
		c.ResourceType, c.ResourcePatternType, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "User:fuzz", "*"
		c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	case *kmsg.DescribeACLsRequest:
		r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny
		r.Principal, r.Host, r.Operation, r.PermissionType = nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	case *kmsg.DeleteACLsRequest:
		d := &r.Filters[0]
		d.ResourceType, d.ResourcePatternType, d.Principal, d.Host = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, kmsg.StringPtr("User:fuzz"), kmsg.StringPtr("*")
		d.Operation, d.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r.Deletions[0].Mechanism = 1
		u := &r.Upsertions[0]
		u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = 2, 4096, []byte("salt"), bytes.Repeat([]byte{1}, 64)
	}
	return req
}

// fillSeed fills v's exported fields: one default element in each array,
// "fuzz" in each string and byte field, a record batch in each Records
// field. Numbers and booleans keep kmsg's defaults.
func fillSeed(v reflect.Value) {
	for i := range v.NumField() {
		f, field := v.Field(i), v.Type().Field(i)
		if !field.IsExported() || field.Name == "UnknownTags" {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("fuzz")
		case reflect.Pointer:
			if field.Type.Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf(kmsg.StringPtr("fuzz")))
			}
		case reflect.Struct:
			fillSeed(f)
		case reflect.Slice:
			f.Set(seedSlice(field))
		}
	}
}

func seedSlice(field reflect.StructField) reflect.Value {
	elem := field.Type.Elem()
	switch {
	case elem.Kind() == reflect.Uint8 && field.Name == "Records":
		return reflect.ValueOf(logtest.Batch{Records: 2, ValueSize: 8}.Encode())
	case elem.Kind() == reflect.Uint8:
		return reflect.ValueOf([]byte("fuzz"))
	}
	one := reflect.New(elem)
	if d, ok := one.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	switch elem.Kind() {
	case reflect.Struct:
		fillSeed(one.Elem())
	case reflect.String:
		one.Elem().SetString("fuzz")
	}
	s := reflect.MakeSlice(field.Type, 0, 1)
	return reflect.Append(s, one.Elem())
}
