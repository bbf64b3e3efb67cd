// Command substitute calls catalog.SubstituteOfficialForTest from an
// ordinary (non-test) program; TestSubstituteRefusedOutsideTests requires
// it to panic.
package main

import "barn.dev/lib/catalog"

func main() {
	catalog.SubstituteOfficialForTest(&catalog.Official{Root: "https://attacker.example/barn"})
}
