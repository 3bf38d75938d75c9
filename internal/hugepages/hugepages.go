// Package hugepages asks Linux to back the Go heap with transparent huge
// pages where the kernel gives them only to memory that asks
// (/sys/kernel/mm/transparent_hugepage/enabled = madvise, the default of
// many distributions).
//
// A busy peer's heap grows for as long as it keeps tasks, and every 4 KiB
// page of it is first touched through a page fault: in a virtual machine a
// trap into the hypervisor's kernel. Under W1 at 3 peers the faults were a
// quarter of the peers' CPU; backed by 2 MiB pages the same heap takes a
// five-hundredth of them (docs/decisions.md "The heap on huge pages").
//
// The Go runtime maps its heap in chunks as it grows and no longer asks for
// huge pages itself (it did in Go 1.21.0; GODEBUG=disablethp=1 is its
// switch for kernels set to always). Enable maps a stretch of heap ahead,
// untouched, advises it, and after every collection that found the runtime
// holding more memory advises the heap's new mappings as well. It changes
// no pointer and no allocation; the kernel decides, page by page, whether
// it has a huge page to give.
package hugepages

import "fmt"

// Result says what Enable found and did.
type Result struct {
	// Mode is the kernel's setting: always, madvise or never; "" where
	// there is none (not Linux, or no transparent huge pages).
	Mode string
	// Advised is true when this process asks for huge pages for its heap
	// (Mode madvise, and not turned off).
	Advised bool
	// Reserved is the heap mapped ahead and advised before any use, bytes.
	Reserved int64
	// NoReserve says why no heap was mapped ahead when the reserve asked
	// for was cut to none (the machine's memory or its overcommit policy
	// unknown, or strict overcommit); "" otherwise.
	NoReserve string
	// Why says why nothing was advised, when nothing was.
	Why string
}

func (r Result) String() string {
	if r.Advised && r.NoReserve != "" {
		return fmt.Sprintf("heap advised for huge pages (kernel: %s; none mapped ahead: %s)", r.Mode, r.NoReserve)
	}
	if r.Advised {
		return fmt.Sprintf("heap advised for huge pages (kernel: %s; %d MiB mapped ahead)", r.Mode, r.Reserved>>20)
	}
	return "heap not advised: " + r.Why
}

// DefaultReserve is the heap Enable maps ahead when asked for 0: 1 GiB of
// address space, no memory until used, and at most a quarter of the
// machine's.
const DefaultReserve = 1 << 30
