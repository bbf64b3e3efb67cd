package exitcode

// BatchClass is the one rule for the class of a command that acted on
// total nodes (or other units) of which some failed, with the classes in
// failed (one entry per failed node):
//
//   - ok when nothing failed;
//   - integrity when any failure is integrity: damaged evidence is never
//     hidden behind "some nodes failed";
//   - partial when some of the total succeeded (the others were kept), or
//     when the failures have different classes;
//   - otherwise — every node failed, all with the same class — that class,
//     so one node that fails alone exits as it failed.
//
// Every batch command (barn-node apply, start, stop, restart, recreate,
// destroy, status, status --watch, provision) derives its class here.
func BatchClass(total int, failed []Class) Class {
	if len(failed) == 0 {
		return OK
	}
	same := true
	for _, c := range failed {
		if c == Integrity {
			return Integrity
		}
		if c != failed[0] {
			same = false
		}
	}
	if len(failed) < total || !same {
		return Partial
	}
	return failed[0]
}
