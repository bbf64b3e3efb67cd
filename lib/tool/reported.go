package tool

// ReportedError marks a failure whose document was already written to
// stdout, such as a barn.result/v1 listing partial node failures: Main
// prints the message (and next) on stderr and exits with the error's class,
// but writes no barn.error/v1 document, so stdout stays one document.
type ReportedError struct{ Err error }

func (e *ReportedError) Error() string { return e.Err.Error() }

func (e *ReportedError) Unwrap() error { return e.Err }

// Reported wraps err as a ReportedError; nil stays nil.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return &ReportedError{Err: err}
}
