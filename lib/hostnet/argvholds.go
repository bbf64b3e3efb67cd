package hostnet

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"barn.dev/lib/lazyre"
	"barn.dev/lib/quote"
)

// argvHolds reports whether a QEMU command line (args) gives a NIC the MAC
// mac (canonical lower case, colons) on bridge:
//   - a -device, -net nic or -nic with mac=/macaddr= that MAC (any spelling
//     QEMU accepts: case, ':' or '-'; key=value or JSON arguments) whose
//     backend is a bridge netdev on bridge (br=, QEMU's default "br0"), a
//     tap whose interface is a port of bridge, or a backend it cannot place
//     (a tap elsewhere or not found, a socket, a hub, none named) — those
//     may be ports of bridge; a user-mode (SLIRP) backend is on no bridge;
//   - any other argument that carries the MAC (-global …mac=, -set …mac=,
//     a form not parsed here): conservatively a holder.
func argvHolds(args []string, mac, bridge string) bool {
	netdevs := map[string]map[string]string{}
	var nics []map[string]string
	parsed := map[int]bool{}
	for i := 0; i+1 < len(args); i++ {
		switch strings.TrimLeft(args[i], "-") {
		case "netdev":
			o := qemuOpts(args[i+1])
			netdevs[o["id"]] = o
			parsed[i+1] = true
		case "nic":
			o := qemuOpts(args[i+1])
			o["netdev"] = "\x00nic" + strconv.Itoa(i) // its own backend: itself
			netdevs[o["netdev"]] = o
			nics = append(nics, o)
			parsed[i+1] = true
		case "device", "net":
			nics = append(nics, qemuOpts(args[i+1]))
			parsed[i+1] = true
		}
	}
	for _, o := range nics {
		if normMAC(o["mac"]) != mac && normMAC(o["macaddr"]) != mac {
			continue
		}
		backend, ok := netdevs[o["netdev"]]
		if !ok {
			return o["type"] != "user"
		}
		if onBridge(backend, bridge) {
			return true
		}
	}
	for i, a := range args {
		if !parsed[i] && carriesMAC(a, mac) {
			return true
		}
	}
	return false
}

// onBridge reports whether a netdev's options may put it on bridge.
func onBridge(o map[string]string, bridge string) bool {
	switch o["type"] {
	case "user":
		return false
	case "bridge":
		br := o["br"]
		if br == "" {
			br = "br0"
		}
		return br == bridge
	case "tap":
		if o["ifname"] == "" {
			return true
		}
		master, err := os.Readlink(filepath.Join("/sys/class/net", o["ifname"], "master"))
		return err != nil || filepath.Base(master) == bridge
	}
	return true
}

// qemuOpts reads one option argument: a JSON object, or QEMU's
// "TYPE,k=v,..." (doubled commas are literal commas), into its keys;
// "type" is the leading word, the type= key, or a JSON driver/type.
func qemuOpts(arg string) map[string]string {
	o := map[string]string{}
	if strings.HasPrefix(strings.TrimSpace(arg), "{") {
		var j map[string]any
		if json.Unmarshal([]byte(arg), &j) == nil {
			for k, v := range j {
				if s, ok := v.(string); ok {
					o[k] = s
				}
			}
		}
	} else {
		for i, kv := range quote.SplitQEMUOpts(arg) {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case ok:
				o[k] = v
			case i == 0:
				o["type"] = k
			}
		}
	}
	if o["type"] == "" {
		o["type"] = o["driver"]
	}
	return o
}

// normMAC is s as a canonical MAC ("" when it is none); QEMU also accepts
// '-' between the octets.
func normMAC(s string) string {
	hw, err := net.ParseMAC(strings.ReplaceAll(s, "-", ":"))
	if err != nil {
		return ""
	}
	return hw.String()
}

var macLikeRE = lazyre.New(`(?i)(?:^|[^0-9a-f])((?:[0-9a-f]{2}[:-]){5}[0-9a-f]{2})(?:$|[^0-9a-f])`)

// carriesMAC reports whether arg spells mac anywhere.
func carriesMAC(arg, mac string) bool {
	for _, m := range macLikeRE.Compiled().FindAllStringSubmatch(arg, -1) {
		if normMAC(m[1]) == mac {
			return true
		}
	}
	return false
}
