package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string { return writeFile(t, dir, name, body) }
	tests := []struct {
		name, path, want, wantErr string
	}{
		{"trailing newline", write("a", "s3cret\n"), "s3cret", ""},
		{"surrounding space", write("b", "  s3cret \r\n"), "s3cret", ""},
		{"empty", write("c", " \n"), "", "empty"},
		{"two lines", write("d", "one\ntwo\n"), "", "more than one line"},
		{"too large", write("e", strings.Repeat("x", MaxSize+1)), "", "larger than"},
		{"missing", filepath.Join(dir, "nope"), "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFile(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadFile = %q, %v; want an error mentioning %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ReadFile = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := ReadFile(write("f", "")); !errors.Is(err, ErrEmpty) {
		t.Errorf("ReadFile(empty) = %v; want ErrEmpty", err)
	}
}

func TestFromEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	line, scoped := filepath.Join(filepath.Dir(file), "line"), filepath.Join(filepath.Dir(file), "scoped")
	for path, body := range map[string]string{line: "tok-0123456789abcdef name=x scope=read\n", scoped: "tok-0123456789abcdef\tscope=read\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"neither", nil, "", ""},
		{"value", map[string]string{"T": "v"}, "v", ""},
		{"file", map[string]string{"T_FILE": file}, "from-file", ""},
		{"both", map[string]string{"T": "v", "T_FILE": file}, "", "both set"},
		{"missing file", map[string]string{"T_FILE": file + ".x"}, "", "T_FILE"},
		// A line of a peer's token file: said so, not sent to be a 401.
		{"server line", map[string]string{"T_FILE": line}, "", "T_FILE: " + line + " holds a line of a peer's token file (name=, scope=): a client's file holds the token alone"},
		{"server line, scope", map[string]string{"T_FILE": scoped}, "", "holds a line of a peer's token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv("T", func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv = %q, %v; want an error mentioning %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FromEnv = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestReadList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string { return writeFile(t, dir, name, body) }
	got, err := ReadList(write("a", "# tokens\r\n\n  new \r\nold\n\t# gone\n"))
	if err != nil || strings.Join(got, ",") != "new,old" {
		t.Errorf("ReadList = %q, %v; want [new old]", got, err)
	}
	for _, body := range []string{"", "\n \n", "# only a comment\n"} {
		if got, err := ReadList(write("b", body)); !errors.Is(err, ErrEmpty) {
			t.Errorf("ReadList(%q) = %q, %v; want ErrEmpty", body, got, err)
		}
	}
	if _, err := ReadList(write("c", strings.Repeat("x\n", MaxSize))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadList(too large) = %v; want larger than", err)
	}
}

// writeFile writes body to the file name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A client's NEEDLE_API_TOKEN_FILE naming a peer's token file (several
// lines) says so, and no error carries the package's name: it said
// "secret: FILE: holds more than one line" (trial s82).
func TestFromEnvPeerTokenFile(t *testing.T) {
	dir := t.TempDir()
	peerFile := filepath.Join(dir, "api.tokens")
	if err := os.WriteFile(peerFile, []byte("0123456789abcdef0123 name=a\nfedcba9876543210fedc name=b scope=read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NEEDLE_API_TOKEN_FILE": peerFile}
	_, err := FromEnv("NEEDLE_API_TOKEN", func(k string) string { return env[k] })
	if !errors.Is(err, ErrLines) || !strings.Contains(err.Error(), "not a peer's --api-token-file") || strings.Contains(err.Error(), "secret:") {
		t.Errorf("FromEnv(a peer's token file) = %v; want ErrLines saying it is a peer's file, without \"secret:\"", err)
	}
	env["NEEDLE_API_TOKEN_FILE"] = filepath.Join(dir, "missing")
	if _, err := FromEnv("NEEDLE_API_TOKEN", func(k string) string { return env[k] }); err == nil || strings.Contains(err.Error(), "secret:") {
		t.Errorf("FromEnv(a missing file) = %v; want an error without \"secret:\"", err)
	}
}
