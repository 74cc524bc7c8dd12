//go:build e2e && bench

package bench

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// evictPageCache drops a file's pages from the page cache, so that a
// binary started next faults its pages in from disk. The peak RSS of a
// process counts the pages of its binary it maps, and the kernel maps
// already cached neighbours of each page it faults in: a freshly built
// binary (wholly cached) started at up to 9 MiB more peak RSS than the
// same code from a binary not read for a while (docs/performance.md).
// Evicting before each start makes the runs of an A/B comparable.
func evictPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	return nil
}
