package state

import (
	"os"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestDamagedEvidenceIsNeverAbsence: each node document, present but
// empty, whitespace or truncated, is integrity (7) naming that file from
// ReadNodeDocuments — never the nil of a missing file.
func TestDamagedEvidenceIsNeverAbsence(t *testing.T) {
	for _, name := range []string{NodeStateName, JournalName, TransactionName} {
		for what, content := range map[string]string{"empty": "", "whitespace": " \n", "truncated": `{"schema":"barn.state`} {
			t.Run(name+"/"+what, func(t *testing.T) {
				r := testRoot(t)
				s := testSpec("n1")
				if err := r.WriteNode(testNode(r, s, "n1")); err != nil {
					t.Fatal(err)
				}
				if d, err := r.ReadNodeDocuments("n1"); err != nil || d.State == nil || d.Journal != nil || d.Transaction != nil {
					t.Fatalf("sound node: %+v, %v", d, err)
				}
				path := r.NodeFile("n1", name)
				if err := os.WriteFile(path, []byte(content), FileMode); err != nil {
					t.Fatal(err)
				}
				d, err := r.ReadNodeDocuments("n1")
				if exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), path) {
					t.Fatalf("ReadNodeDocuments = %+v, %v; want integrity naming %s", d, err, path)
				}
			})
		}
	}
}
