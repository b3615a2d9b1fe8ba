package allocdir

import (
	"fmt"
	"testing"
)

// BenchmarkBuild is one alloc dir of one task, built and destroyed: the
// build runs beside the CSI hook's mounts on the claim path.
func BenchmarkBuild(b *testing.B) {
	root := b.TempDir()
	for i := 0; b.Loop(); i++ {
		d := New(root, fmt.Sprintf("alloc-%d", i))
		if err := d.Build([]string{"web"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := d.Destroy(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
