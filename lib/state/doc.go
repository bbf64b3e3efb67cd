// Package state owns every file under the state root (BARN_HOME, default
// ~/.barn): its layout, atomic writes, strict versioned documents, locks and
// the bounded event log. Every other package reaches the state root through
// it; nothing else creates, reads or removes files there.
package state
