//go:build unix && !linux

package hostshare

func openNoSymlinks(path string) (int, error) { return openWalk(path) }
