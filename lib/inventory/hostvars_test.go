package inventory

// HostVars returns, for every host key, the consumed variables as Ansible
// resolves them (Ansible's pick, also where Barn refuses it as ambiguous),
// decoded as Ansible (YAML 1.1 or JSON) decodes them: nil, bool, int64,
// float64, string, []any, map[string]any. Keys no source sets are absent.
// It is the view the differential suites compare with
// `ansible-inventory --list`. err is the usage error of every structural
// problem and ambiguity refusal (the map is then still filled as far as
// the inventory could be read); values Resolve would refuse for their
// content (an invalid size, say) are not errors here.
func HostVars(in *Input) (map[string]map[string]any, error) {
	a := &analysis{}
	a.load(in)
	out := map[string]map[string]any{}
	if a.m == nil {
		return out, errorOf(a.r.probs.sorted(), a.in.Name)
	}
	for _, name := range a.m.HostOrder {
		h := a.m.Hosts[name]
		groups := a.m.hostGroups(h)
		vars := map[string]any{}
		for _, k := range ConsumedKeys() {
			res := a.resolve(h, groups, k)
			if res.ambiguity != nil {
				res.pick.def.src.at(res.pick.def.Value, *res.ambiguity)
			}
			if res.pick != nil {
				vars[k] = res.pick.def.src.generic(res.pick.def.Value, nil)
			}
		}
		out[name] = vars
	}
	if !a.r.probs.empty() {
		return out, errorOf(a.r.probs.sorted(), a.in.Name)
	}
	return out, nil
}
