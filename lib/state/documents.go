package state

import (
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// invalid joins validation problems into one integrity error naming path.
func invalid(path string, probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	e := integrity(path, "%s", strings.Join(probs, "; "))
	return e
}

// refuseWrite reports a document that fails validation before it is
// written: a bug in the caller, never persisted.
func refuseWrite(path string, probs []string) error {
	return exitcode.New(exitcode.Runtime, "refusing to write an invalid document to %s: %s", path, strings.Join(probs, "; ")).
		WithReason("invalid_state_document")
}

// ReadDeployment reads <Dir>/state.json. It returns (nil, nil) when the file
// does not exist, and an integrity error (7) naming the file when it is
// damaged: wrong mode or owner, a symlink, unknown fields, trailing data, a
// newer schema, a spec_hash that does not match the stored spec, or other
// invalid values. It never reports a damaged file as "no deployment".
func (r *Root) ReadDeployment() (*Deployment, error) {
	path := r.DeploymentFile()
	data, err := r.readFileStrict(path, MaxDocumentBytes)
	if err != nil || data == nil {
		return nil, err
	}
	var d Deployment
	if err := decodeDocument(path, data, DeploymentSchema, &d); err != nil {
		return nil, err
	}
	if err := invalid(path, ValidateDeployment(&d)); err != nil {
		return nil, err
	}
	return &d, nil
}

// WriteDeployment atomically writes <Dir>/state.json. It fills Schema,
// SpecHash (spec.DeploymentHash of d.Spec; d.Spec is sealed first so node
// hashes are filled too) and UpdatedAt, then validates; Generation must be
// ≥1. The caller holds the deployment lock.
func (r *Root) WriteDeployment(d *Deployment) error {
	if err := r.ensureDir(r.Dir, true); err != nil {
		return err
	}
	d.Schema = DeploymentSchema
	d.Spec.Seal()
	d.SpecHash = spec.DeploymentHash(&d.Spec)
	d.UpdatedAt = r.now()
	if d.Spec.Nodes == nil {
		d.Spec.Nodes = []spec.Node{}
	}
	if d.Spec.Skipped == nil {
		d.Spec.Skipped = []spec.Skipped{}
	}
	path := r.DeploymentFile()
	if p := ValidateDeployment(d); len(p) > 0 {
		return refuseWrite(path, p)
	}
	data, err := encodeDocument(d)
	if err != nil {
		return err
	}
	return r.writeDocument(path, data)
}

// ReadNode reads nodes/<node>/state.json: (nil, nil) when absent, an
// integrity error naming the file when damaged (see ReadDeployment), and a
// usage error for an invalid node name.
func (r *Root) ReadNode(node string) (*Node, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	path := r.NodeFile(node, NodeStateName)
	data, err := r.readNodeFile(node, path, MaxDocumentBytes)
	if err != nil || data == nil {
		return nil, err
	}
	return r.decodeNode(node, path, data)
}

func (r *Root) decodeNode(node, path string, data []byte) (*Node, error) {
	var n Node
	if err := decodeDocument(path, data, NodeSchema, &n); err != nil {
		return nil, err
	}
	if err := invalid(path, r.ValidateNode(node, &n)); err != nil {
		return nil, err
	}
	if err := r.earlierNode(path, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// readNodeFile checks the node directory (when present) before reading a
// file in it, so a symlinked node directory is refused rather than read
// through.
func (r *Root) readNodeFile(node, path string, max int64) ([]byte, error) {
	for _, d := range []string{r.NodesDir(), r.NodeDir(node)} {
		if err := r.checkDir(d, false); err != nil {
			if isNotExist(err) {
				return nil, nil
			}
			return nil, err
		}
	}
	return r.readFileStrict(path, max)
}

// WriteNode atomically writes nodes/<n.Node>/state.json, creating the node
// directory. It fills Schema, CreatedAt (when zero) and UpdatedAt, and
// refuses (runtime error) a document that would not validate.
func (r *Root) WriteNode(n *Node) error {
	if _, err := r.EnsureNodeDir(n.Node); err != nil {
		return err
	}
	n.Schema = NodeSchema
	now := r.now()
	if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	n.UpdatedAt = now
	if n.DataDisks == nil {
		n.DataDisks = []vmrecord.DataDisk{}
	}
	normaliseInvocation(&n.Invocation)
	path := r.NodeFile(n.Node, NodeStateName)
	if p := r.ValidateNode(n.Node, n); len(p) > 0 {
		return refuseWrite(path, p)
	}
	data, err := encodeDocument(n)
	if err != nil {
		return err
	}
	return r.writeDocument(path, data)
}

// RemoveNode removes nodes/<node>/state.json (durably) only while it is
// the file this Root last read or wrote there (removeSeen: integrity,
// and kept, otherwise). It does not touch any other file.
func (r *Root) RemoveNode(node string) error {
	if err := checkNodeName(node); err != nil {
		return err
	}
	return r.removeSeen(r.NodeFile(node, NodeStateName))
}

// RemoveDeployment removes <Dir>/state.json (the applied deployment)
// durably; a missing one is fine.
func (r *Root) RemoveDeployment() error { return RemoveFileDurable(r.DeploymentFile()) }

func normaliseInvocation(inv *vmrecord.Invocation) {
	if inv.Args == nil {
		inv.Args = []string{}
	}
	if inv.InheritedFiles == nil {
		inv.InheritedFiles = []vmrecord.InheritedFile{}
	}
}

// ReadJournal reads nodes/<node>/prepare.json (≤1 MiB): (nil, nil) when
// absent, integrity (7) naming the file when damaged — including an
// artifact outside the allowlist or outside the node directory, a
// duplicate artifact, an invalid UUID or a wrong state_path.
func (r *Root) ReadJournal(node string) (*Journal, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	path := r.NodeFile(node, JournalName)
	data, err := r.readNodeFile(node, path, MaxJournalBytes)
	if err != nil || data == nil {
		return nil, err
	}
	return r.decodeJournal(node, path, data)
}

func (r *Root) decodeJournal(node, path string, data []byte) (*Journal, error) {
	var j Journal
	if err := decodeDocument(path, data, JournalSchema, &j); err != nil {
		return nil, err
	}
	if err := invalid(path, r.ValidateJournal(node, &j)); err != nil {
		return nil, err
	}
	if err := r.earlierJournal(path, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// WriteJournal atomically writes nodes/<j.Node>/prepare.json, creating the
// node directory. It fills Schema, StartedAt (when zero) and UpdatedAt and
// refuses a journal that would not validate.
func (r *Root) WriteJournal(j *Journal) error {
	if _, err := r.EnsureNodeDir(j.Node); err != nil {
		return err
	}
	j.Schema = JournalSchema
	now := r.now()
	if j.StartedAt.IsZero() {
		j.StartedAt = now
	}
	j.UpdatedAt = now
	if j.Completed == nil {
		j.Completed = []Artifact{}
	}
	if j.Invocation != nil {
		normaliseInvocation(j.Invocation)
	}
	path := r.NodeFile(j.Node, JournalName)
	if p := r.ValidateJournal(j.Node, j); len(p) > 0 {
		return refuseWrite(path, p)
	}
	data, err := encodeDocument(j)
	if err != nil {
		return err
	}
	if len(data) > MaxJournalBytes {
		return refuseWrite(path, []string{"journal is larger than 1 MiB"})
	}
	return r.writeDocument(path, data)
}

// RemoveJournal removes nodes/<node>/prepare.json durably, only while it
// is the file this Root last read or wrote (removeSeen); a missing
// journal is not an error.
func (r *Root) RemoveJournal(node string) error {
	if err := checkNodeName(node); err != nil {
		return err
	}
	return r.removeSeen(r.NodeFile(node, JournalName))
}

// ReadTransaction reads nodes/<node>/transaction.json: (nil, nil) when
// absent, integrity (7) naming the file when damaged.
func (r *Root) ReadTransaction(node string) (*Transaction, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	path := r.NodeFile(node, TransactionName)
	data, err := r.readNodeFile(node, path, MaxJournalBytes)
	if err != nil || data == nil {
		return nil, err
	}
	return decodeTransaction(node, path, data)
}

func decodeTransaction(node, path string, data []byte) (*Transaction, error) {
	var t Transaction
	if err := decodeDocument(path, data, TransactionSchema, &t); err != nil {
		return nil, err
	}
	if err := invalid(path, ValidateTransaction(node, &t)); err != nil {
		return nil, err
	}
	return &t, nil
}

// WriteTransaction atomically writes nodes/<t.Node>/transaction.json,
// filling Schema, StartedAt (when zero) and UpdatedAt.
func (r *Root) WriteTransaction(t *Transaction) error {
	if _, err := r.EnsureNodeDir(t.Node); err != nil {
		return err
	}
	t.Schema = TransactionSchema
	now := r.now()
	if t.StartedAt.IsZero() {
		t.StartedAt = now
	}
	t.UpdatedAt = now
	if t.Completed == nil {
		t.Completed = []TxnStep{}
	}
	path := r.NodeFile(t.Node, TransactionName)
	if p := ValidateTransaction(t.Node, t); len(p) > 0 {
		return refuseWrite(path, p)
	}
	data, err := encodeDocument(t)
	if err != nil {
		return err
	}
	return r.writeDocument(path, data)
}

// RemoveTransaction removes nodes/<node>/transaction.json durably, only
// while it is the file this Root last read or wrote (removeSeen); a
// missing record is not an error.
func (r *Root) RemoveTransaction(node string) error {
	if err := checkNodeName(node); err != nil {
		return err
	}
	return r.removeSeen(r.NodeFile(node, TransactionName))
}

// NodeDocuments is everything recorded for one node: its committed state,
// its prepare journal and its transaction record, each nil when the file
// does not exist.
type NodeDocuments struct {
	State       *Node
	Journal     *Journal
	Transaction *Transaction
}

// ReadNodeDocuments reads all three documents of node's directory. A file
// that does not exist is nil; a file that exists but is empty, truncated,
// unreadable or otherwise damaged is the integrity error (7) naming it:
// every command that reports or plans a node reads it through here, so
// damaged evidence beside a node is never mistaken for its absence.
func (r *Root) ReadNodeDocuments(node string) (NodeDocuments, error) {
	var d NodeDocuments
	var err error
	if d.State, err = r.ReadNode(node); err != nil {
		return NodeDocuments{}, err
	}
	if d.Journal, err = r.ReadJournal(node); err != nil {
		return NodeDocuments{}, err
	}
	if d.Transaction, err = r.ReadTransaction(node); err != nil {
		return NodeDocuments{}, err
	}
	return d, nil
}

// ReadInterruptedWrite reads name, a file in node's directory that an
// interrupted atomic write of one of its documents left behind
// (".state.json<digits>", ".prepare.json<digits>" or
// ".transaction.json<digits>"), as the document it was about to become,
// with the real document's checks (mode, owner, strict schema,
// validation). The result has exactly one field set. Any other name is a
// usage error; content that does not decode and validate — a write cut
// short by a power loss — is the integrity error naming the file: such a
// leftover proves nothing about who wrote it.
func (r *Root) ReadInterruptedWrite(node, name string) (NodeDocuments, error) {
	if err := checkNodeName(node); err != nil {
		return NodeDocuments{}, err
	}
	base := tempBase(name)
	if base == "" {
		return NodeDocuments{}, exitcode.New(exitcode.Usage, "%s is not a temporary file of a node document", name)
	}
	path := r.NodeFile(node, name)
	max := int64(MaxJournalBytes)
	if base == NodeStateName {
		max = MaxDocumentBytes
	}
	data, err := r.readNodeFile(node, path, max)
	if err == nil && data == nil {
		err = integrity(path, "does not exist")
	}
	if err != nil {
		return NodeDocuments{}, err
	}
	var d NodeDocuments
	switch base {
	case NodeStateName:
		d.State, err = r.decodeNode(node, path, data)
	case JournalName:
		d.Journal, err = r.decodeJournal(node, path, data)
	default:
		d.Transaction, err = decodeTransaction(node, path, data)
	}
	if err != nil {
		return NodeDocuments{}, err
	}
	return d, nil
}

// writeDocument writes a state document atomically and remembers the
// identity of the file it wrote (removeSeen).
func (r *Root) writeDocument(path string, data []byte) error {
	if err := WriteFileAtomic(path, data, FileMode); err != nil {
		return err
	}
	return r.rememberWritten(path)
}
