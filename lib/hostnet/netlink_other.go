//go:build !linux

package hostnet

import (
	"fmt"
	"runtime"
)

// NetlinkOps is the netlink backend's link surface; netlink exists only on
// Linux, so on other hosts (macOS uses the vmnet backend) every operation
// fails.
type NetlinkOps struct{}

func errNoNetlink() error { return fmt.Errorf("netlink is Linux only (this host is %s)", runtime.GOOS) }

func (NetlinkOps) Links() ([]LinkInfo, error)              { return nil, errNoNetlink() }
func (NetlinkOps) Routes() ([]RouteInfo, error)            { return nil, errNoNetlink() }
func (NetlinkOps) AddBridge(name, mac, alias string) error { return errNoNetlink() }
func (NetlinkOps) DelLinkIndex(index int) error            { return errNoNetlink() }
func (NetlinkOps) AddAddr(link, cidr string) error         { return errNoNetlink() }
func (NetlinkOps) DelAddr(link, cidr string) error         { return errNoNetlink() }
func (NetlinkOps) SetUp(link string) error                 { return errNoNetlink() }
