package fakeqemu

import (
	"encoding/json"
	"net"
	"time"
)

type request struct {
	Execute string          `json:"execute"`
	Args    json.RawMessage `json:"arguments,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
}

type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

// serve is one monitor: like QEMU it serves one client at a time; the
// next is accepted only when the current one disconnects.
func (v *vm) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		v.handle(c)
	}
}

func (v *vm) handle(c net.Conn) {
	defer c.Close()
	if v.cfg.modes[HangQMP] {
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return // silent until the client gives up
			}
		}
	}
	enc := json.NewEncoder(c)
	dec := json.NewDecoder(c)
	enc.Encode(map[string]any{"QMP": map[string]any{
		"version": map[string]any{
			"qemu":    map[string]int{"major": 7, "minor": 2, "micro": 0},
			"package": "barn-fakeqemu",
		},
		"capabilities": []string{"oob"},
	}})
	negotiated := false
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		reply := func(ret any, qerr *qmpError) {
			m := map[string]any{}
			if qerr != nil {
				m["error"] = qerr
			} else {
				m["return"] = ret
			}
			if len(req.ID) > 0 {
				m["id"] = req.ID
			}
			enc.Encode(m)
		}
		event := func(name string) {
			now := time.Now()
			enc.Encode(map[string]any{"event": name, "data": map[string]any{"guest": false},
				"timestamp": map[string]int64{"seconds": now.Unix(), "microseconds": int64(now.Nanosecond() / 1000)}})
		}
		if !negotiated && req.Execute != "qmp_capabilities" {
			reply(nil, &qmpError{"CommandNotFound", "Expecting capabilities negotiation with 'qmp_capabilities'"})
			continue
		}
		switch req.Execute {
		case "qmp_capabilities":
			if negotiated {
				reply(nil, &qmpError{"CommandNotFound", "Capabilities negotiation is already complete, command ignored"})
				continue
			}
			negotiated = true
			reply(map[string]any{}, nil)
		case "query-name":
			reply(map[string]any{"name": v.cfg.name}, nil)
		case "query-uuid":
			u := v.cfg.uuid
			if v.cfg.modes[WrongUUID] {
				u = WrongUUIDValue
			}
			reply(map[string]any{"UUID": u}, nil)
		case "query-status":
			status, running := "running", true
			v.run.mu.Lock()
			if v.cfg.paused {
				status, running = "prelaunch", false
			} else if v.run.stopped {
				status, running = "paused", false
			}
			v.run.mu.Unlock()
			reply(map[string]any{"status": status, "running": running, "singlestep": false}, nil)
		case "system_powerdown":
			reply(map[string]any{}, nil)
			event("POWERDOWN")
			if !v.cfg.modes[IgnorePowerdown] {
				v.shutdown()
			}
		case "quit":
			reply(map[string]any{}, nil)
			event("SHUTDOWN")
			v.shutdown()
		default:
			if ret, qerr, ok := v.runControl(req.Execute, req.Args); ok {
				reply(ret, qerr)
				continue
			}
			reply(nil, &qmpError{"CommandNotFound", "The command " + req.Execute + " has not been found"})
		}
	}
}
