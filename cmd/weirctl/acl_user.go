package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl acl user create|delete|list: SASL/SCRAM credentials through
// AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as
// rpk acl user does for Redpanda. kadm salts the password here, so only
// the salt and the salted password travel; the broker keeps neither the
// password nor anything it could be read back from.

const (
	// Kafka's bounds for SCRAM iterations, which the broker enforces too;
	// checking them here turns a typo into a message before any call.
	minScramIterations = 4096
	maxScramIterations = 16384

	// maxPasswordLine bounds what --password-file reads, so pointing it at
	// the wrong file fails instead of uploading something huge.
	maxPasswordLine = 64 << 10
)

// scramMechanismNames lists --mechanism's values for help and completion.
func scramMechanismNames() []string {
	return []string{kadm.ScramSha256.String(), kadm.ScramSha512.String()}
}

func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case kadm.ScramSha256.String():
		return kadm.ScramSha256, nil
	case kadm.ScramSha512.String():
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("--mechanism must be %s, got %q", strings.Join(scramMechanismNames(), " or "), s)
}

// mechanismName keeps an unknown code visible instead of kadm's bare
// UNKNOWN, so a newer broker's mechanism can be told apart.
func mechanismName(m kadm.ScramMechanism) string {
	switch m {
	case kadm.ScramSha256, kadm.ScramSha512:
		return m.String()
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

func validateUserName(user string) error {
	if user == "" {
		return errors.New("the user name must not be empty")
	}
	return nil
}

func validateScramIterations(n int32) error {
	if n < minScramIterations || n > maxScramIterations {
		return fmt.Errorf("--iterations must be between %d and %d (Kafka's SCRAM limits), got %d", minScramIterations, maxScramIterations, n)
	}
	return nil
}

func registerMechanismCompletion(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("mechanism", cobra.FixedCompletions(scramMechanismNames(), cobra.ShellCompDirectiveNoFileComp))
}

func newACLUserCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "user",
		Aliases: []string{"users"},
		Short:   "Create, delete and list SASL/SCRAM users",
		Long: "SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512) over the Kafka protocol\n" +
			"(AlterUserScramCredentials, DescribeUserScramCredentials). weirctl salts the\n" +
			"password; the controller stores the salt, iterations and derived keys, and\n" +
			"every broker applies them at once.",
	}
	cmd.AddCommand(newACLUserCreateCommand(g), newACLUserDeleteCommand(g), newACLUserListCommand(g))
	return cmd
}

// userResult is the JSON shape of create and delete: one per credential
// so a script sees exactly which one failed.
type userResult struct {
	User         string `json:"user"`
	Mechanism    string `json:"mechanism"`
	Iterations   int32  `json:"iterations,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

type userCreateOptions struct {
	password     string
	passwordFile string
	mechanism    string
	iterations   int32
}

func newACLUserCreateCommand(g *cli.Options) *cobra.Command {
	o := &userCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create USER (--password P | --password-file F)",
		Short: "Create a SCRAM user, or replace the password of an existing one",
		Long: "Create a SCRAM credential for USER with one mechanism. If USER already has\n" +
			"a credential for that mechanism, its password and iterations are replaced\n" +
			"(Kafka's upsert); credentials for the other mechanism are kept.\n" +
			"Give the password with exactly one of --password or --password-file; the\n" +
			"file's first line is the password (- reads stdin), without its line end.\n" +
			"Prefer --password-file: a password on the command line ends up in shell\n" +
			"history and is visible to other local users.",
		Example: "  weirctl acl user create alice --password-file alice.pw\n" +
			"  vault read -field=password secret/bob | weirctl acl user create bob --password-file - --mechanism SCRAM-SHA-512",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			up, err := o.upsert(cmd, args[0])
			if err != nil {
				return err
			}
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up})
				if err != nil {
					return g.DescribeCallErr("create user "+up.User, err)
				}
				res := userResult{User: up.User, Mechanism: mechanismName(up.Mechanism), Iterations: up.Iterations}
				res.Error, res.ErrorMessage = alterOutcome(up.User, resps)
				return printUserResults(cmd.OutOrStdout(), g.Format, "create", []userResult{res})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.password, "password", "", "the password (visible in shell history; prefer --password-file)")
	f.StringVar(&o.passwordFile, "password-file", "", "read the password from this file's first line (- for stdin)")
	f.StringVar(&o.mechanism, "mechanism", kadm.ScramSha256.String(), "SCRAM mechanism: "+strings.Join(scramMechanismNames(), " or "))
	f.Int32Var(&o.iterations, "iterations", minScramIterations, fmt.Sprintf("SCRAM iterations, %d to %d", minScramIterations, maxScramIterations))
	registerMechanismCompletion(cmd)
	return cmd
}

// upsert checks every flag before reading the password and before any
// network call, so a mistake costs nothing and consumes no stdin.
func (o *userCreateOptions) upsert(cmd *cobra.Command, user string) (kadm.UpsertSCRAM, error) {
	var up kadm.UpsertSCRAM
	if err := validateUserName(user); err != nil {
		return up, err
	}
	mech, err := parseScramMechanism(o.mechanism)
	if err != nil {
		return up, err
	}
	if err := validateScramIterations(o.iterations); err != nil {
		return up, err
	}
	password, err := o.readPassword(cmd)
	if err != nil {
		return up, err
	}
	return kadm.UpsertSCRAM{User: user, Mechanism: mech, Iterations: o.iterations, Password: password}, nil
}

func (o *userCreateOptions) readPassword(cmd *cobra.Command) (string, error) {
	inline, fromFile := cmd.Flags().Changed("password"), cmd.Flags().Changed("password-file")
	switch {
	case inline && fromFile:
		return "", errors.New("give the password with --password or --password-file, not both")
	case !inline && !fromFile:
		return "", errors.New("missing password: use --password P or --password-file F (--password-file - reads stdin)")
	case inline:
		if o.password == "" {
			return "", errors.New("--password must not be empty")
		}
		return o.password, nil
	case o.passwordFile == "":
		return "", errors.New("--password-file needs a path (- for stdin)")
	}
	return readPasswordFile(cmd.InOrStdin(), o.passwordFile)
}

// readPasswordFile returns the first line of path (stdin for "-") without
// its "\n" or "\r\n". Nothing else is trimmed: spaces are valid in a
// password.
func readPasswordFile(stdin io.Reader, path string) (string, error) {
	r, source := stdin, "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		defer f.Close()
		r, source = f, path
	}
	line, err := bufio.NewReader(io.LimitReader(r, maxPasswordLine+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from %s: %w", source, err)
	}
	if !strings.HasSuffix(line, "\n") && len(line) > maxPasswordLine {
		return "", fmt.Errorf("the first line of %s is longer than %d bytes; that is not a password", source, maxPasswordLine)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", fmt.Errorf("the password from %s is empty (its first line is used)", source)
	}
	return line, nil
}

// alterOutcome is the error name and detail of user's answer ("" when it
// succeeded).
func alterOutcome(user string, resps kadm.AlteredUserSCRAMs) (name, detail string) {
	r, ok := resps[user]
	switch {
	case !ok:
		return "MISSING_RESPONSE", "broker did not answer for this user"
	case r.Err != nil:
		return cli.KafkaErrName(r.Err), cli.KafkaErrDetail(r.Err, r.ErrMessage)
	}
	return "", ""
}

// printUserResults prints create's or delete's outcome and fails when any
// credential failed, saying so in words on stderr as well.
func printUserResults(w io.Writer, format, verb string, results []userResult) error {
	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, results)
	} else {
		creating := verb == "create"
		headers := []string{"USER", "MECHANISM", "STATUS"}
		if creating {
			headers = []string{"USER", "MECHANISM", "ITERATIONS", "STATUS"}
		}
		t := cli.NewTable(headers...)
		for _, r := range results {
			status := "OK"
			if r.Error != "" {
				status = joinErr(r.Error, r.ErrorMessage)
			}
			if creating {
				t.Row(r.User, r.Mechanism, r.Iterations, status)
			} else {
				t.Row(r.User, r.Mechanism, status)
			}
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	var failures []string
	for _, r := range results {
		if r.Error != "" {
			failures = append(failures, userFailure(verb, r))
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

func userFailure(verb string, r userResult) string {
	if verb == "delete" && r.Error == kerr.ResourceNotFound.Message {
		return fmt.Sprintf("user %s has no %s credential to delete (%s)", r.User, r.Mechanism, r.Error)
	}
	return fmt.Sprintf("%s %s credential of user %s: %s", verb, r.Mechanism, r.User, joinErr(r.Error, r.ErrorMessage))
}

func newACLUserDeleteCommand(g *cli.Options) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:     "delete USER",
		Aliases: []string{"rm"},
		Short:   "Delete a SCRAM user's credentials",
		Long: "Delete USER's credential for --mechanism, or, without it, every credential\n" +
			"USER has (found with a describe first). A user without credentials is an\n" +
			"error (RESOURCE_NOT_FOUND).",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if err := validateUserName(user); err != nil {
				return err
			}
			var mechs []kadm.ScramMechanism
			if cmd.Flags().Changed("mechanism") {
				m, err := parseScramMechanism(mechanism)
				if err != nil {
					return err
				}
				mechs = append(mechs, m)
			}
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				if len(mechs) == 0 {
					described, err := adm.DescribeUserSCRAMs(ctx, user)
					if err != nil {
						return g.DescribeCallErr("describe user "+user, err)
					}
					if mechs, err = userMechanisms(user, described); err != nil {
						return err
					}
				}
				dels := make([]kadm.DeleteSCRAM, 0, len(mechs))
				for _, m := range mechs {
					dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: m})
				}
				resps, err := adm.AlterUserSCRAMs(ctx, dels, nil)
				if err != nil {
					return g.DescribeCallErr("delete user "+user, err)
				}
				// The broker answers once per user: every mechanism
				// shares that outcome (a user's deletions apply or fail
				// together).
				name, detail := alterOutcome(user, resps)
				results := make([]userResult, 0, len(mechs))
				for _, m := range mechs {
					results = append(results, userResult{User: user, Mechanism: mechanismName(m), Error: name, ErrorMessage: detail})
				}
				return printUserResults(cmd.OutOrStdout(), g.Format, "delete", results)
			})
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "delete only this mechanism's credential: "+strings.Join(scramMechanismNames(), " or ")+" (default: every mechanism the user has)")
	registerMechanismCompletion(cmd)
	return cmd
}

// userMechanisms returns the mechanisms user has credentials for, from a
// describe of that one user.
func userMechanisms(user string, described kadm.DescribedUserSCRAMs) ([]kadm.ScramMechanism, error) {
	d, ok := described[user]
	switch {
	case !ok:
		return nil, fmt.Errorf("describe user %s: broker did not answer for this user", user)
	case errors.Is(d.Err, kerr.ResourceNotFound):
		return nil, fmt.Errorf("user %s has no SCRAM credentials to delete (%s)", user, kerr.ResourceNotFound.Message)
	case d.Err != nil:
		return nil, fmt.Errorf("describe user %s: %s", user, cli.StatusCell(d.Err, d.ErrMessage))
	}
	var mechs []kadm.ScramMechanism
	var unknown []string
	for _, c := range d.CredInfos {
		switch c.Mechanism {
		case kadm.ScramSha256, kadm.ScramSha512:
			mechs = append(mechs, c.Mechanism)
		default:
			unknown = append(unknown, mechanismName(c.Mechanism))
		}
	}
	sort.Slice(mechs, func(i, j int) bool { return mechs[i] < mechs[j] })
	switch {
	case len(mechs) > 0:
		return mechs, nil
	case len(unknown) > 0:
		return nil, fmt.Errorf("user %s has credentials only for mechanisms weirctl does not know (%s)", user, strings.Join(unknown, ", "))
	}
	return nil, fmt.Errorf("user %s has no SCRAM credentials to delete (%s)", user, kerr.ResourceNotFound.Message)
}

// userCredential is one line of `acl user list`: a credential's mechanism
// and iterations, never anything derived from the password.
type userCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func newACLUserListCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "list [USER...]",
		Aliases: []string{"ls"},
		Short:   "List SCRAM users with their mechanisms and iterations",
		Long: "List every SCRAM credential, or those of the users named. A named user\n" +
			"without credentials is reported on stderr (RESOURCE_NOT_FOUND) and makes\n" +
			"the exit status non-zero, after the others are printed.",
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			names := dedupe(args)
			for _, n := range names {
				if err := validateUserName(n); err != nil {
					return err
				}
			}
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				described, err := adm.DescribeUserSCRAMs(ctx, names...)
				if err != nil {
					return g.DescribeCallErr("list users", err)
				}
				return printUserList(cmd.OutOrStdout(), g.Format, names, described)
			})
		},
	}
}

// printUserList prints the credentials sorted by user and mechanism, then
// fails naming every user that could not be listed: a named user without
// credentials, or one the broker did not answer for.
func printUserList(w io.Writer, format string, names []string, described kadm.DescribedUserSCRAMs) error {
	creds := []userCredential{}
	for _, d := range described {
		if d.Err != nil {
			continue
		}
		for _, c := range d.CredInfos {
			creds = append(creds, userCredential{User: d.User, Mechanism: mechanismName(c.Mechanism), Iterations: c.Iterations})
		}
	}
	sort.Slice(creds, func(i, j int) bool {
		if creds[i].User != creds[j].User {
			return creds[i].User < creds[j].User
		}
		return creds[i].Mechanism < creds[j].Mechanism
	})

	var problems []string
	if len(names) == 0 {
		for _, d := range described.Sorted() {
			if d.Err != nil {
				problems = append(problems, userListProblem(d))
			}
		}
	}
	for _, n := range names {
		d, ok := described[n]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("user %s: broker did not answer for this user", n))
		case d.Err != nil:
			problems = append(problems, userListProblem(d))
		}
	}

	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, creds)
	} else {
		t := cli.NewTable("USER", "MECHANISM", "ITERATIONS")
		for _, c := range creds {
			t.Row(c.User, c.Mechanism, c.Iterations)
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func userListProblem(d kadm.DescribedUserSCRAM) string {
	if errors.Is(d.Err, kerr.ResourceNotFound) {
		return fmt.Sprintf("user %s has no SCRAM credentials (%s)", d.User, kerr.ResourceNotFound.Message)
	}
	return fmt.Sprintf("user %s: %s", d.User, cli.StatusCell(d.Err, d.ErrMessage))
}
