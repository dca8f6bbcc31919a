package emulator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryEnv names the environment variable that, when set, gives the path of
// the emulator_main binary to start.
const BinaryEnv = "SPANNER_EMULATOR_BIN"

// HostEnv names the environment variable that points Spanner clients at a
// running emulator (host:port). When it is set, Start uses that emulator
// instead of starting one.
const HostEnv = "SPANNER_EMULATOR_HOST"

// binaryName is the gRPC server of the Cloud Spanner emulator.
const binaryName = "emulator_main"

// sdkRoots are where the gcloud SDK is installed by Debian packages, the
// official tarball and Homebrew.
var sdkRoots = []string{
	"/usr/lib/google-cloud-sdk",
	"/usr/share/google-cloud-sdk",
	"/opt/google-cloud-sdk",
	"/usr/local/google-cloud-sdk",
	"/opt/homebrew/share/google-cloud-sdk",
	"/usr/local/share/google-cloud-sdk",
}

// InstallHint tells a person how to get the emulator binary.
const InstallHint = `install the Cloud Spanner emulator: "apt-get install google-cloud-cli-spanner-emulator" ` +
	`(Debian/Ubuntu, from Google's Cloud SDK repository) or "gcloud components install cloud-spanner-emulator"; ` +
	`or set ` + BinaryEnv + ` to the path of emulator_main; ` +
	`or set ` + HostEnv + ` to host:port of an emulator that is already running`

// ErrBinaryNotFound is returned by FindBinary and Start when no emulator
// binary can be found. Its message says how to install one.
var ErrBinaryNotFound = fmt.Errorf("emulator: Cloud Spanner emulator binary (%s) not found: %s", binaryName, InstallHint)

// FindBinary returns the path of the emulator's gRPC server binary. It looks,
// in order, at $SPANNER_EMULATOR_BIN, at emulator_main on $PATH, at the SDK
// that holds the gcloud found on $PATH, and at the usual gcloud SDK install
// locations. It returns an error wrapping ErrBinaryNotFound if none exists.
func FindBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("emulator: %s=%q is not an executable file: %w", BinaryEnv, p, ErrBinaryNotFound)
	}
	if p, err := exec.LookPath(binaryName); err == nil {
		return p, nil
	}
	roots := append([]string{}, sdkRoots...)
	if gcloud, err := exec.LookPath("gcloud"); err == nil {
		if real, err := filepath.EvalSymlinks(gcloud); err == nil {
			// gcloud lives in <sdk>/bin/gcloud.
			roots = append([]string{filepath.Dir(filepath.Dir(real))}, roots...)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, "google-cloud-sdk"))
	}
	var tried []string
	for _, root := range roots {
		p := filepath.Join(root, "bin", "cloud_spanner_emulator", binaryName)
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%w (looked at $%s, $PATH and %s)", ErrBinaryNotFound, BinaryEnv, strings.Join(tried, ", "))
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}
