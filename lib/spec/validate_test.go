package spec

import (
	"strings"
	"testing"
)

// validSpec is a two-node spec that breaks no rule.
func validSpec() *Spec {
	s := &Spec{
		Schema: Schema,
		Deployment: Deployment{Name: DeploymentName, Arch: "native", Image: "",
			Subnet: Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
			User:   User{Name: "dba", UID: 88}},
		Nodes: []Node{
			{Name: "meta", Address: "10.10.10.10", Control: true, MAC: NICs{Management: "0a:ba:01:0a:0a:0a", Private: "0a:ba:02:0a:0a:0a"},
				CPUs: 2, MemoryBytes: 4 << 30, RootDiskBytes: 64 << 30,
				Disks:   []Disk{{Name: "pg-data", Mount: "/pg/data", SizeBytes: 128 << 30, FS: "auto", Serial: "abcdefghijklmnopqrst"}},
				Aliases: []string{"infra.lab"},
				Shares:  []Share{{Host: "/srv/src", Guest: "/src", Readonly: true, Tag: "barn-0123456789abcdef0123"}}},
			{Name: "pg-1", Address: "10.10.10.11", MAC: NICs{Management: "0a:ba:01:0a:0a:0b", Private: "0a:ba:02:0a:0a:0b"},
				CPUs: 1, MemoryBytes: 512 << 20, RootDiskBytes: 1 << 30, Disks: []Disk{}, Aliases: []string{}, Shares: []Share{}},
		},
		Skipped: []Skipped{}, Control: "meta",
	}
	s.Seal()
	return s
}

func TestValidSpecPasses(t *testing.T) {
	if err := validSpec().Validate(); err != nil {
		t.Fatal(err)
	}
}

// Every rule Validate checks fails naming the field; the table is the
// contract barn-plan, apply and the seed renderer rely on.
func TestValidateNamesTheField(t *testing.T) {
	cases := map[string]struct {
		mut   func(*Spec)
		field string
	}{
		"schema":            {func(s *Spec) { s.Schema = "barn.spec/v0" }, "schema"},
		"root login":        {func(s *Spec) { s.Deployment.User = User{Name: "root"} }, "deployment.user.name"},
		"system account":    {func(s *Spec) { s.Deployment.User = User{Name: "daemon"} }, "deployment.user.name"},
		"dba uid":           {func(s *Spec) { s.Deployment.User.UID = 1000 }, "deployment.user.uid"},
		"system uid":        {func(s *Spec) { s.Deployment.User = User{Name: "admin", UID: 999} }, "deployment.user.uid"},
		"arch":              {func(s *Spec) { s.Deployment.Arch = "x86_64" }, "deployment.arch"},
		"public subnet":     {func(s *Spec) { s.Deployment.Subnet.CIDR = "8.8.8.0/24" }, "deployment.subnet.cidr"},
		"host":              {func(s *Spec) { s.Deployment.Subnet.Host = "10.10.10.2" }, "deployment.subnet.host"},
		"no nodes":          {func(s *Spec) { s.Nodes = nil }, "nodes"},
		"upper name":        {func(s *Spec) { s.Nodes[1].Name = "PG-1" }, "nodes[PG-1].name"},
		"path name":         {func(s *Spec) { s.Nodes[1].Name = "../etc" }, "nodes[../etc].name"},
		"reserved address":  {func(s *Spec) { s.Nodes[1].Address = "10.10.10.5" }, "nodes[pg-1].address"},
		"other subnet":      {func(s *Spec) { s.Nodes[1].Address = "10.10.11.11" }, "nodes[pg-1].address"},
		"same address":      {func(s *Spec) { s.Nodes[1].Address = "10.10.10.10" }, "nodes[pg-1].address"},
		"mac":               {func(s *Spec) { s.Nodes[1].MAC.Private = "0A:BA:02:0A:0A:0B" }, "nodes[pg-1].mac.private"},
		"same mac":          {func(s *Spec) { s.Nodes[1].MAC.Private = s.Nodes[1].MAC.Management }, "nodes[pg-1].mac.private"},
		"cpus":              {func(s *Spec) { s.Nodes[1].CPUs = 257 }, "nodes[pg-1].cpus"},
		"memory":            {func(s *Spec) { s.Nodes[1].MemoryBytes = 256 << 20 }, "nodes[pg-1].memory_bytes"},
		"memory alignment":  {func(s *Spec) { s.Nodes[1].MemoryBytes = 1<<30 + 512 }, "nodes[pg-1].memory_bytes"},
		"root disk":         {func(s *Spec) { s.Nodes[1].RootDiskBytes = 0 }, "nodes[pg-1].root_disk_bytes"},
		"root disk sectors": {func(s *Spec) { s.Nodes[1].RootDiskBytes = 1000 }, "nodes[pg-1].root_disk_bytes"},
		"disk mount":        {func(s *Spec) { s.Nodes[0].Disks[0].Mount = "/usr/pg" }, "nodes[meta].disks[0].mount"},
		"disk name":         {func(s *Spec) { s.Nodes[0].Disks[0].Name = "data" }, "nodes[meta].disks[0].name"},
		"disk fs":           {func(s *Spec) { s.Nodes[0].Disks[0].FS = "btrfs" }, "nodes[meta].disks[0].fs"},
		"disk serial":       {func(s *Spec) { s.Nodes[0].Disks[0].Serial = "abcdefghijklmnopqrs1" }, "nodes[meta].disks[0].serial"},
		"disk over ssh": {func(s *Spec) {
			s.Nodes[0].Disks[0] = Disk{Name: "home", Mount: "/home", SizeBytes: 1 << 30, FS: "auto", Serial: "abcdefghijklmnopqrst"}
		}, "nodes[meta].disks[0].mount"},
		"alias":           {func(s *Spec) { s.Nodes[0].Aliases = []string{"Infra"} }, "nodes[meta].aliases[0]"},
		"alias of a peer": {func(s *Spec) { s.Nodes[1].Aliases = []string{"infra.lab"} }, "nodes[pg-1].aliases[0]"},
		"share host":      {func(s *Spec) { s.Nodes[0].Shares[0].Host = "~/src" }, "nodes[meta].shares[0].host"},
		"share guest":     {func(s *Spec) { s.Nodes[0].Shares[0].Guest = "/etc/src" }, "nodes[meta].shares[0].guest"},
		"share over disk": {func(s *Spec) { s.Nodes[0].Shares[0].Guest = "/pg/data/x" }, "nodes[meta].shares[0].guest"},
		"share tag":       {func(s *Spec) { s.Nodes[0].Shares[0].Tag = "src" }, "nodes[meta].shares[0].tag"},
		"two controls":    {func(s *Spec) { s.Nodes[1].Control = true }, "nodes[pg-1].control"},
		"control name":    {func(s *Spec) { s.Control = "pg-1" }, "control"},
	}
	for name, c := range cases {
		s := validSpec()
		c.mut(s)
		err := s.Validate()
		if err == nil {
			t.Errorf("%s: Validate passed", name)
			continue
		}
		if err.Field != c.field || err.Hint == "" || !strings.HasPrefix(err.Error(), c.field+" = ") {
			t.Errorf("%s: %q (field %s, hint %q), want field %s with a hint", name, err, err.Field, err.Hint, c.field)
		}
	}
}

func TestRootDiskFits(t *testing.T) {
	if v := CheckRootDiskFits(2<<30, 2<<30); v != nil {
		t.Fatalf("equal sizes: %v", v)
	}
	v := CheckRootDiskFits(1<<30, 2252<<20+1)
	if v == nil || v.Problem != "root disk 1GiB is smaller than the image's virtual size 2361393153 bytes" || v.Hint != "raise vm_disk to at least 2253MiB" {
		t.Fatalf("got %+v", v)
	}
}
