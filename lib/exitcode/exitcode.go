// Package exitcode is the one exit-class table shared by every Barn tool,
// and the error type that carries a class through the libraries to a
// command's exit status.
//
// The table (class → process exit status):
//
//	ok          0   success, including usable guests with limitations
//	runtime     1   ran and failed; anything unclassified
//	usage       2   bad command line or inventory, unknown node/image selector
//	capability  3   a missing tool, network or privilege
//	conflict    4   state forbids it, or the deployment lock is busy
//	partial     5   some nodes of a batch failed; the others were kept
//	resource    6   an address, port, subnet or disk is taken
//	integrity   7   digest, signature, identity, ownership or a damaged document
//	cancelled 130   SIGINT/SIGTERM or a declined confirmation
//
// kong's own parse errors (which it would exit with 80) are mapped to usage.
package exitcode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Class is the closed set of failure classes. It is the value of the
// `error` field of a barn.error/v1 document.
type Class string

// The classes, in the order of the table above.
const (
	OK         Class = "ok"
	Runtime    Class = "runtime"
	Usage      Class = "usage"
	Capability Class = "capability"
	Conflict   Class = "conflict"
	Partial    Class = "partial"
	Resource   Class = "resource"
	Integrity  Class = "integrity"
	Cancelled  Class = "cancelled"
)

var codes = map[Class]int{
	OK: 0, Runtime: 1, Usage: 2, Capability: 3, Conflict: 4,
	Partial: 5, Resource: 6, Integrity: 7, Cancelled: 130,
}

// Code is the process exit status of c; an unknown class is runtime (1).
func (c Class) Code() int {
	if n, ok := codes[c]; ok {
		return n
	}
	return 1
}

// Valid reports whether c is one of the table's classes.
func (c Class) Valid() bool { _, ok := codes[c]; return ok }

// Error is a failure with an exit class. Message is the one-line text shown
// after "<tool>: error:"; Reason is a stable snake_case machine reason such as
// "stale_plan", one of the reason table's (LookupReason; a test fails on any
// other); Next is one command that settles the failure, when one clear
// action exists; Detail is any JSON-encodable value giving structure (for
// example the list of all inventory errors).
type Error struct {
	Class   Class
	Reason  string
	Message string
	Next    string
	Detail  any
	Err     error // the wrapped cause, if any
}

// New returns an error of class c with a formatted message.
func New(c Class, format string, args ...any) *Error {
	return &Error{Class: c, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of class c whose message is "<msg>: <err>" and which
// unwraps to err.
func Wrap(c Class, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Class: c, Message: msg, Err: err}
}

// RepeatedClause returns the first run of clauses the message says twice
// in a row ("" when none). A message's clauses are its ": "-separated
// parts; a cause printed twice — a Wrap whose format also formats the
// cause — shows as a run immediately repeated: "read k: open k: no such
// file: open k: no such file". The same words in two places that are not
// adjacent (two nodes of a batch failing alike) are not a repetition.
func (e *Error) RepeatedClause() string {
	c := strings.Split(e.Message, ": ")
	for k := 1; 2*k <= len(c); k++ {
		for i := 0; i+2*k <= len(c); i++ {
			if slices.Equal(c[i:i+k], c[i+k:i+2*k]) {
				return strings.Join(c[i:i+k], ": ")
			}
		}
	}
	return ""
}

// WithReason returns a copy of e with Reason set.
func (e *Error) WithReason(reason string) *Error { c := *e; c.Reason = reason; return &c }

// WithNext returns a copy of e with Next set.
func (e *Error) WithNext(next string) *Error { c := *e; c.Next = next; return &c }

// WithDetail returns a copy of e with Detail set.
func (e *Error) WithDetail(d any) *Error { c := *e; c.Detail = d; return &c }

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// ExitCode makes *Error a kong.ExitCoder.
func (e *Error) ExitCode() int { return e.Class.Code() }

// ClassOf returns the class of err: the class of the outermost *Error in its
// chain, cancelled for context cancellation, ok for nil, else runtime.
func ClassOf(err error) Class {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) && e.Class.Valid() {
		return e.Class
	}
	if errors.Is(err, context.Canceled) {
		return Cancelled
	}
	return Runtime
}

// As returns err as an *Error, classifying a plain error by ClassOf.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" {
			c := *e
			c.Message = err.Error()
			return &c
		}
		return e
	}
	return &Error{Class: ClassOf(err), Message: err.Error(), Err: err}
}
