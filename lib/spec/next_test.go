package spec

import "testing"

func TestPipeline(t *testing.T) {
	for _, c := range []struct{ source, tail, want string }{
		{"pigsty.yml", "barn-node apply", "barn-inventory resolve -f pigsty.yml | barn-plan | barn-node apply"},
		{"/home/me/my lab.yml", "barn-node recreate n1 --force", "barn-inventory resolve -f '/home/me/my lab.yml' | barn-plan | barn-node recreate n1 --force"},
		{"<stdin>", "barn-node apply", "barn-inventory resolve | barn-plan | barn-node apply"},
		{"", "", "barn-inventory resolve | barn-plan"},
	} {
		if got := Pipeline(c.source, c.tail); got != c.want {
			t.Errorf("Pipeline(%q, %q) = %q, want %q", c.source, c.tail, got, c.want)
		}
	}
}
