package allocdir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
)

func TestAllocDir_BuildAndDestroy(t *testing.T) {
	root := t.TempDir()
	d := New(root, "a1")
	must.NoError(t, d.Build([]string{"web", "side"}))
	must.NoError(t, d.Build([]string{"web", "side"}), must.Sprint("build is idempotent"))

	for _, p := range []string{"alloc/logs", "alloc/data", "alloc/tmp", "web/local", "web/secrets", "side/tmp"} {
		st, err := os.Stat(filepath.Join(root, "a1", p))
		must.NoError(t, err)
		must.True(t, st.IsDir())
	}
	st, err := os.Stat(d.TaskDir("web").SecretsDir)
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o700), st.Mode().Perm())
	// Every mode as meant, whatever the umask cleared (it clears 0o022
	// here: the shared and tmp dirs need their chmod).
	for p, want := range map[string]os.FileMode{
		"": 0o755, "alloc": 0o755, "alloc/logs": 0o755, "web": 0o700, "web/local": 0o755,
		"alloc/data": 0o777 | os.ModeSticky, "alloc/tmp": 0o777 | os.ModeSticky, "side/tmp": 0o777 | os.ModeSticky,
	} {
		st, err := os.Stat(filepath.Join(root, "a1", p))
		must.NoError(t, err)
		must.Eq(t, want, st.Mode()&(os.ModePerm|os.ModeSticky), must.Sprintf("mode of %q", p))
	}
	must.Eq(t, filepath.Join(root, "a1", "alloc", "logs"), d.TaskDir("web").LogDir)

	must.NoError(t, d.Destroy())
	_, err = os.Stat(d.Dir)
	must.True(t, os.IsNotExist(err))
	must.NoError(t, d.Destroy(), must.Sprint("destroy is idempotent"))
}

// TestAllocDir_DestroyNeverDeletesThroughAMount bind-mounts a "volume" into
// a task dir: Destroy must unmount it and leave the volume's files alone.
func TestAllocDir_DestroyNeverDeletesThroughAMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	root := t.TempDir()
	volume := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(volume, "precious"), []byte("data"), 0o644))

	d := New(root, "a1")
	must.NoError(t, d.Build([]string{"web"}))
	target := filepath.Join(d.TaskDir("web").Dir, "volume")
	must.NoError(t, os.Mkdir(target, 0o755))
	must.NoError(t, syscall.Mount(volume, target, "", syscall.MS_BIND, ""))
	t.Cleanup(func() { syscall.Unmount(target, syscall.MNT_DETACH) })

	must.NoError(t, d.Destroy())
	b, err := os.ReadFile(filepath.Join(volume, "precious"))
	must.NoError(t, err)
	must.Eq(t, "data", string(b))
	_, err = os.Stat(d.Dir)
	must.True(t, os.IsNotExist(err))
}

func TestParseMountsUnder(t *testing.T) {
	info := strings.Join([]string{
		"22 1 8:1 / / rw - ext4 /dev/vda rw",
		"30 22 8:1 /v /data/alloc/a1/web/vol rw - ext4 /dev/vda rw",
		"31 30 8:1 /v /data/alloc/a1/web/vol/deeper rw - ext4 /dev/vda rw",
		"32 22 8:1 /v /data/alloc/a10/web rw - ext4 /dev/vda rw",
		`33 22 8:1 /v /data/alloc/a1/web/with\040space rw - ext4 /dev/vda rw`,
		"34 30 8:1 /v /data/alloc/a1/web/vol rw - ext4 /dev/vda rw",
	}, "\n")
	got, err := parseMountsUnder(strings.NewReader(info), "/data/alloc/a1")
	must.NoError(t, err)
	must.Eq(t, []string{
		"/data/alloc/a1/web/vol/deeper",
		"/data/alloc/a1/web/with space",
		"/data/alloc/a1/web/vol",
		"/data/alloc/a1/web/vol",
	}, got)
}

// TestAllocDir_TaskNamesNeverEscape: a task name that is not one path
// element is refused by Build, and its TaskDir stays inside the alloc
// dir (the issue's `../../../../tmp/x` wrote outside it).
func TestAllocDir_TaskNamesNeverEscape(t *testing.T) {
	root := t.TempDir()
	d := New(root, "a1")
	for _, name := range []string{"../x", "../../../../tmp/x", "..", ".", "a/b", `a\b`, "a\x00b", ""} {
		td := d.TaskDir(name)
		rel, err := filepath.Rel(d.Dir, td.Dir)
		must.NoError(t, err)
		must.False(t, strings.HasPrefix(rel, "..") || rel == "." || strings.Contains(rel, "/"),
			must.Sprintf("task %q: dir %s is not one element below the alloc dir", name, td.Dir))
		err = d.Build([]string{name})
		must.ErrorContains(t, err, "is not a single path element")
	}
	entries, err := os.ReadDir(root)
	must.NoError(t, err)
	for _, e := range entries {
		must.Eq(t, "a1", e.Name())
	}
}

// TestAllocDir_TmpDirsAreSticky: shared tmp dirs carry the sticky bit
// (0o1777 is not os.ModeSticky in Go, which is how it was lost before).
func TestAllocDir_TmpDirsAreSticky(t *testing.T) {
	d := New(t.TempDir(), "a1")
	must.NoError(t, d.Build([]string{"web"}))
	for _, p := range []string{filepath.Join(d.SharedDir, "tmp"), d.TaskDir("web").TmpDir} {
		fi, err := os.Stat(p)
		must.NoError(t, err)
		must.True(t, fi.Mode()&os.ModeSticky != 0, must.Sprintf("%s has mode %s, no sticky bit", p, fi.Mode()))
		must.Eq(t, os.FileMode(0o777), fi.Mode().Perm())
	}
}
