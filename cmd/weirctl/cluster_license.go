package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	licensePath = "/v1/features/license"

	// maxLicenseSize is far above any real license; it turns "--file
	// pointed at the wrong thing" into an error instead of a huge upload.
	maxLicenseSize = 1 << 20

	violationNotice = "enterprise features in use behave as their defaults until a valid license is set (weirctl cluster license set)"
)

func newClusterLicenseCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "license",
		Short: "Show or set the enterprise license through a broker's admin API",
		Long: "The license commands use the admin HTTP API (admin_addr) of any broker;\n" +
			"a license set on one broker reaches every broker through the controller.\n" +
			admin.URLHelp,
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.AddCommand(newLicenseSetCommand(g, client), newLicenseInfoCommand(g, client))
	return cmd
}

// licenseInfo is the part of GET /v1/features/license the summary shows.
// It is only ever decoded: --format json|yaml relay the broker's document
// verbatim, so fields newer brokers add are neither lost nor fatal.
type licenseInfo struct {
	Loaded        bool            `json:"loaded"`
	License       *licenseDetails `json:"license"`
	Status        string          `json:"status"`
	Valid         bool            `json:"valid"`
	BuiltinTrial  bool            `json:"builtin_trial"`
	Expires       int64           `json:"expires"`
	DaysLeft      int64           `json:"days_left"`
	Warning       string          `json:"warning"`
	Violation     bool            `json:"violation"`
	FeaturesInUse []string        `json:"features_in_use"`
}

// licenseDetails is the loaded license itself.
type licenseDetails struct {
	FormatVersion int    `json:"format_version"`
	Org           string `json:"org"`
	Type          string `json:"type"`
	Expires       int64  `json:"expires"`
	SHA256        string `json:"sha256"`
}

// licenseDocument is one answer of the license endpoint, kept both as sent
// (for json/yaml output) and decoded (for the summary).
type licenseDocument struct {
	raw  json.RawMessage
	info licenseInfo
}

// callLicenseAPI sends one request to the license endpoint; body is the
// license text for PUT and nil for GET.
func callLicenseAPI(ctx context.Context, c *admin.Client, method string, body []byte) (licenseDocument, error) {
	var doc licenseDocument
	contentType := ""
	if body != nil {
		contentType = "text/plain"
	}
	if err := c.Send(ctx, method, licensePath, contentType, body, &doc.raw); err != nil {
		var ae *admin.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return doc, fmt.Errorf("%s %s: this broker has no license API (is it an older weir?): %w", method, licensePath, err)
		}
		return doc, err
	}
	if err := json.Unmarshal(doc.raw, &doc.info); err != nil {
		return doc, fmt.Errorf("admin API: %s %s answered %q: %w", method, licensePath, doc.raw, err)
	}
	return doc, nil
}

func newLicenseSetCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "set KEY | --file PATH",
		Short: "Install a license on the cluster (checked by the broker: format, signature, expiry)",
		Long: "Install a license, given as the argument or read from --file (- reads\n" +
			"stdin). Prefer --file: a key on the command line ends up in shell history.\n" +
			"Prints the license now in effect; a refused license prints the broker's reason.",
		Example: "  weirctl cluster license set --file acme.license\n" +
			"  vault read -field=license secret/weir | weirctl cluster license set -f -",
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := readLicenseArg(cmd, args, file)
			if err != nil {
				return err
			}
			doc, err := callLicenseAPI(cmd.Context(), client(), http.MethodPut, text)
			if err != nil {
				var ae *admin.Error
				if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
					return fmt.Errorf("the broker refused the license: %w", err)
				}
				return fmt.Errorf("setting the license: %w", err)
			}
			if g.Format == cli.FormatTable {
				fmt.Fprintln(cmd.OutOrStdout(), "license set")
				fmt.Fprintln(cmd.OutOrStdout())
			}
			return printLicense(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.Format, doc)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the license from this file (- for stdin)")
	return cmd
}

// readLicenseArg returns the license text from exactly one source. It is
// sent as read: the broker accepts surrounding whitespace, and trimming
// here could make the hash it reports differ from the file's.
func readLicenseArg(cmd *cobra.Command, args []string, file string) ([]byte, error) {
	var text []byte
	var source string
	switch {
	case len(args) > 1:
		return nil, fmt.Errorf("set takes one license key, got %d arguments (quote the key, or use --file)", len(args))
	case len(args) == 1 && file != "":
		return nil, errors.New("give the license either as an argument or with --file, not both")
	case len(args) == 1:
		text, source = []byte(args[0]), "the argument"
	case file == "":
		return nil, errors.New("missing license: give the key as an argument, or use --file PATH (--file - reads stdin)")
	case file == "-":
		data, err := readLimited(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("reading the license from stdin: %w", err)
		}
		text, source = data, "stdin"
	default:
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading the license: %w", err)
		}
		defer f.Close()
		data, err := readLimited(f)
		if err != nil {
			return nil, fmt.Errorf("reading the license from %s: %w", file, err)
		}
		text, source = data, file
	}
	if strings.TrimSpace(string(text)) == "" {
		return nil, fmt.Errorf("the license from %s is empty", source)
	}
	return text, nil
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxLicenseSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxLicenseSize {
		return nil, fmt.Errorf("more than %d bytes; that is not a license", maxLicenseSize)
	}
	return data, nil
}

func newLicenseInfoCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show the license status, whether enterprise features are in violation, and the loaded license",
		Long: "Show the license in effect: status (valid, trial, expired, none), whether\n" +
			"enterprise features in use lack a valid license, the loaded license's\n" +
			"organization, type, expiry and SHA-256. Warnings also go to stderr.\n" +
			"--format json|yaml prints the broker's GET " + licensePath + " document.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := callLicenseAPI(cmd.Context(), client(), http.MethodGet, nil)
			if err != nil {
				return fmt.Errorf("reading the license: %w", err)
			}
			return printLicense(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.Format, doc)
		},
	}
}

// printLicense prints the summary (or the document) to w, and warnings to
// errOut in every format so that scripts and cron mails notice them even
// when stdout goes to jq or /dev/null.
func printLicense(w, errOut io.Writer, format string, doc licenseDocument) error {
	info := doc.info
	if info.Warning != "" {
		fmt.Fprintln(errOut, "warning:", info.Warning)
	}
	if info.Violation {
		fmt.Fprintln(errOut, "warning:", violationNotice)
	}
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, doc.raw)
	}
	t := cli.NewTable()
	t.Row("STATUS", licenseStatusText(info))
	t.Row("VIOLATION", cli.YesNo(info.Violation))
	t.Row("FEATURES IN USE", listOrNone(info.FeaturesInUse))
	if l := info.License; info.Loaded && l != nil {
		t.Row("ORGANIZATION", l.Org)
		t.Row("TYPE", l.Type)
	} else {
		t.Row("LICENSE", "none loaded")
	}
	t.Row("EXPIRES", licenseExpiryText(info))
	if l := info.License; info.Loaded && l != nil {
		t.Row("SHA256", l.SHA256)
	}
	if info.Warning != "" {
		t.Row("WARNING", info.Warning)
	}
	if err := t.Write(w); err != nil {
		return err
	}
	if info.Violation {
		_, err := fmt.Fprintf(w, "\nLicense violation: %s.\n", violationNotice)
		return err
	}
	return nil
}

func licenseStatusText(info licenseInfo) string {
	s := info.Status
	if s == "" {
		s = "unknown"
	}
	switch {
	case !info.BuiltinTrial:
		return s
	case s == "trial":
		return "trial (built-in)"
	default:
		return s + " (built-in trial)"
	}
}

// licenseExpiryText shows when what is in effect ends (the built-in trial
// when no license is loaded), falling back to the license's own expiry
// for brokers that leave the top-level field out.
func licenseExpiryText(info licenseInfo) string {
	exp := info.Expires
	if exp == 0 && info.License != nil {
		exp = info.License.Expires
	}
	if exp == 0 {
		return "unknown"
	}
	at := time.Unix(exp, 0).UTC().Format(time.RFC3339)
	switch {
	case info.Status == "expired" || info.DaysLeft < 0:
		return at + " (expired)"
	case info.DaysLeft == 1:
		return at + " (1 day left)"
	default:
		return fmt.Sprintf("%s (%d days left)", at, info.DaysLeft)
	}
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
