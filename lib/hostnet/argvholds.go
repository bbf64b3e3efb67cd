package hostnet

import "strings"

// argvHolds reports whether a QEMU command line (args, without the
// program's own quoting) gives a NIC the MAC mac (lower case) on bridge:
// a -device or -net nic argument with mac=/macaddr= that MAC whose
// backend is a bridge netdev on bridge (br=, QEMU's default "br0"), or a
// backend it cannot place (a tap, a socket, a legacy hub, none named):
// those may be ports of bridge. A user-mode (SLIRP) backend is on no
// bridge. QEMU's doubled commas inside values are not decoded: Barn's
// MACs and bridge names have none.
func argvHolds(args []string, mac, bridge string) bool {
	netdevs := map[string]map[string]string{} // id → options, "" key: the type
	var nics []map[string]string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-netdev", "--netdev", "-nic", "--nic":
			o := qemuOpts(args[i+1])
			netdevs[o["id"]] = o
			if args[i] == "-nic" || args[i] == "--nic" {
				nics = append(nics, map[string]string{"mac": o["mac"], "netdev": o["id"], "type": o[""]})
			}
		case "-device", "--device", "-net", "--net":
			nics = append(nics, qemuOpts(args[i+1]))
		}
	}
	for _, o := range nics {
		m := o["mac"]
		if m == "" {
			m = o["macaddr"]
		}
		if strings.ToLower(m) != mac {
			continue
		}
		backend, ok := netdevs[o["netdev"]]
		if !ok || o["netdev"] == "" {
			return o["type"] != "user"
		}
		switch backend[""] {
		case "user":
			continue
		case "bridge":
			br := backend["br"]
			if br == "" {
				br = "br0"
			}
			if br != bridge {
				continue
			}
		}
		return true
	}
	return false
}

// qemuOpts splits a QEMU option list "TYPE,k=v,..." into its keys; the
// first element without "=" is the type (key "").
func qemuOpts(arg string) map[string]string {
	o := map[string]string{}
	for i, kv := range strings.Split(arg, ",") {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case ok:
			o[k] = v
		case i == 0:
			o[""] = k
		}
	}
	return o
}
