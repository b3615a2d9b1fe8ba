package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read-only devices. A read-only bind mount of a device node stops writes
// to the node's inode, not to the device: the kernel checks a device's
// access in the device cgroup, never in the mount. So for every device
// node bound read-only into a task (a read-only claim of a block-device
// CSI volume) the executor starts the task in a cgroup of its own, in the
// cgroup v2 hierarchy, with a BPF_PROG_TYPE_CGROUP_DEVICE program that
// refuses opening those devices for writing (open(2) fails with EPERM,
// whatever the task's user, capabilities or node it mknods). Everything
// else stays allowed. The task is put there by clone3(CLONE_INTO_CGROUP),
// so it never runs a single instruction outside it.
//
// A host without a writable cgroup v2 hierarchy (mounted at /sys/fs/cgroup
// or, in hybrid mode, /sys/fs/cgroup/unified) or without cgroup BPF fails
// the task's start with an error saying so: a read-only device that is
// silently writable would be worse.

// devNode is a device a task may only read.
type devNode struct {
	block        bool
	major, minor uint32
}

func (d devNode) String() string {
	t := "c"
	if d.block {
		t = "b"
	}
	return fmt.Sprintf("%s %d:%d", t, d.major, d.minor)
}

// readOnlyDevices returns the device nodes among iso's read-only binds.
func readOnlyDevices(iso *Isolation) ([]devNode, error) {
	var out []devNode
	for _, b := range iso.Binds {
		if !b.Readonly {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(b.HostPath, &st); err != nil {
			return nil, fmt.Errorf("read-only bind of %q: %w", b.HostPath, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFBLK, unix.S_IFCHR:
			out = append(out, devNode{block: st.Mode&unix.S_IFMT == unix.S_IFBLK, major: unix.Major(st.Rdev), minor: unix.Minor(st.Rdev)})
		}
	}
	return out, nil
}

// cgroup2Root returns the mount point of the cgroup v2 hierarchy.
func cgroup2Root() (string, error) {
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var fs unix.Statfs_t
		if err := unix.Statfs(p, &fs); err == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
}

// deviceCgroup is the cgroup a task with read-only devices runs in.
type deviceCgroup struct {
	dir string
	fd  int // the cgroup directory, for CLONE_INTO_CGROUP
}

// newDeviceCgroup creates the task's cgroup and attaches a program that
// denies writing devs. name identifies the task.
func newDeviceCgroup(name string, devs []devNode) (*deviceCgroup, error) {
	root, err := cgroup2Root()
	if err != nil {
		return nil, fmt.Errorf("making devices %v read-only for the task: %w", devs, err)
	}
	dir := filepath.Join(root, "berth", cgroupName(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making devices %v read-only for the task: creating cgroup: %w", devs, err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("making devices %v read-only for the task: opening cgroup: %w", devs, err)
	}
	cg := &deviceCgroup{dir: dir, fd: fd}
	// The directory may be left from an executor that died: a program it
	// attached is still there, and adding ours beside it is harmless.
	if err := attachDeviceFilter(fd, devs); err != nil {
		cg.remove()
		return nil, fmt.Errorf("making devices %v read-only for the task: %w", devs, err)
	}
	return cg, nil
}

// remove closes the cgroup and removes it; the kernel frees the program
// with it. It fails (and leaves an empty cgroup) while a process is in it.
func (cg *deviceCgroup) remove() error {
	if cg.fd >= 0 {
		unix.Close(cg.fd)
		cg.fd = -1
	}
	if err := unix.Rmdir(cg.dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing cgroup %q: %w", cg.dir, err)
	}
	return nil
}

// cgroupName makes a task ID ("<alloc>/<task>") one path element.
func cgroupName(id string) string {
	return strings.NewReplacer("/", "_", "..", "__").Replace(id)
}

// BPF constants (linux/bpf.h), not all in x/sys/unix.
const (
	bpfProgLoad          = 5
	bpfProgAttach        = 8
	bpfProgTypeCgroupDev = 15
	bpfCgroupDevice      = 6 // attach type
	bpfFAllowMulti       = 2

	devcgAccWrite = 4 // BPF_DEVCG_ACC_WRITE
	devcgDevBlock = 1 // BPF_DEVCG_DEV_BLOCK
	devcgDevChar  = 2 // BPF_DEVCG_DEV_CHAR
)

// insn is one eBPF instruction.
type insn struct {
	code     uint8
	dst, src uint8
	off      int16
	imm      int32
}

func (i insn) bytes() []byte {
	b := make([]byte, 8)
	b[0] = i.code
	b[1] = i.dst&0xf | i.src<<4
	binary.LittleEndian.PutUint16(b[2:], uint16(i.off))
	binary.LittleEndian.PutUint32(b[4:], uint32(i.imm))
	return b
}

// Opcodes used below.
const (
	opLdxW   = 0x61 // dst = *(u32 *)(src + off)
	opMovX   = 0xbf // dst = src
	opMovK   = 0xb7 // dst = imm
	opRshK   = 0x77 // dst >>= imm
	opAndK   = 0x57 // dst &= imm
	opJeqK   = 0x15 // if dst == imm goto +off
	opJneK   = 0x55 // if dst != imm goto +off
	opExit   = 0x95
	regR0    = 0
	regCtx   = 1
	regType  = 2
	regAcc   = 3
	regMajor = 4
	regMinor = 5
)

// deviceFilter is the program: given struct bpf_cgroup_dev_ctx
// {access_type = access<<16 | type, major, minor}, it returns 0 (deny) for
// a write access to one of devs and 1 (allow) otherwise.
func deviceFilter(devs []devNode) []insn {
	prog := []insn{
		{code: opLdxW, dst: regType, src: regCtx, off: 0},
		{code: opMovX, dst: regAcc, src: regType},
		{code: opRshK, dst: regAcc, imm: 16},
		{code: opAndK, dst: regAcc, imm: devcgAccWrite},
		{code: opJeqK, dst: regAcc, imm: 0, off: int16(3 + 5*len(devs))}, // not a write: allow
		{code: opAndK, dst: regType, imm: 0xffff},
		{code: opLdxW, dst: regMajor, src: regCtx, off: 4},
		{code: opLdxW, dst: regMinor, src: regCtx, off: 8},
	}
	for _, d := range devs {
		typ := int32(devcgDevChar)
		if d.block {
			typ = devcgDevBlock
		}
		prog = append(prog,
			insn{code: opJneK, dst: regType, imm: typ, off: 4},
			insn{code: opJneK, dst: regMajor, imm: int32(d.major), off: 3},
			insn{code: opJneK, dst: regMinor, imm: int32(d.minor), off: 2},
			insn{code: opMovK, dst: regR0, imm: 0},
			insn{code: opExit},
		)
	}
	return append(prog, insn{code: opMovK, dst: regR0, imm: 1}, insn{code: opExit})
}

// bpfProgLoadAttr is the BPF_PROG_LOAD part of union bpf_attr.
type bpfProgLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       uint64
	license     uint64
	logLevel    uint32
	logSize     uint32
	logBuf      uint64
	kernVersion uint32
	progFlags   uint32
}

// bpfProgAttachAttr is the BPF_PROG_ATTACH part of union bpf_attr.
type bpfProgAttachAttr struct {
	targetFd    uint32
	attachBpfFd uint32
	attachType  uint32
	attachFlags uint32
}

func bpf(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

// attachDeviceFilter loads deviceFilter(devs) and attaches it to the
// cgroup open at cgfd.
func attachDeviceFilter(cgfd int, devs []devNode) error {
	prog := deviceFilter(devs)
	code := make([]byte, 0, 8*len(prog))
	for _, i := range prog {
		code = append(code, i.bytes()...)
	}
	license := []byte("Apache-2.0\x00")
	logBuf := make([]byte, 4096)
	load := bpfProgLoadAttr{
		progType: bpfProgTypeCgroupDev, insnCnt: uint32(len(prog)),
		insns:    uint64(uintptr(unsafe.Pointer(&code[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1, logSize: uint32(len(logBuf)), logBuf: uint64(uintptr(unsafe.Pointer(&logBuf[0]))),
	}
	progfd, err := bpf(bpfProgLoad, unsafe.Pointer(&load), unsafe.Sizeof(load))
	// The kernel read code, license and logBuf during the call.
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	runtime.KeepAlive(logBuf)
	if err != nil {
		msg := strings.TrimRight(string(logBuf[:clen(logBuf)]), "\n")
		return fmt.Errorf("loading the device filter program: %w (verifier: %s)", err, msg)
	}
	defer unix.Close(progfd)
	attach := bpfProgAttachAttr{targetFd: uint32(cgfd), attachBpfFd: uint32(progfd), attachType: bpfCgroupDevice, attachFlags: bpfFAllowMulti}
	if _, err := bpf(bpfProgAttach, unsafe.Pointer(&attach), unsafe.Sizeof(attach)); err != nil {
		return fmt.Errorf("attaching the device filter program to the task's cgroup: %w", err)
	}
	return nil
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
