// faultfs is preloaded (LD_PRELOAD) into the gateway by fault tests to
// make its database's disk fail on command: while the file named by
// FAULTFS_CONTROL exists, every write or sync of a file whose path starts
// with FAULTFS_PREFIX fails with the errno the file names (ENOSPC for a
// full disk, EIO for an I/O error, EROFS for a read-only mount). SQLite
// reaches the disk through libc, so this is the error it would see; the
// Go runtime's own file writes (the usage journal) do not go through libc
// and are not affected.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int fault_for(int fd) {
	const char *control = getenv("FAULTFS_CONTROL");
	const char *prefix = getenv("FAULTFS_PREFIX");
	if (!control || !prefix) return 0;
	char mode[16] = {0};
	FILE *f = fopen(control, "r");
	if (!f) return 0;
	size_t n = fread(mode, 1, sizeof mode - 1, f);
	fclose(f);
	mode[n] = 0;
	char link[64], path[4096];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t len = readlink(link, path, sizeof path - 1);
	if (len < 0) return 0;
	path[len] = 0;
	if (strncmp(path, prefix, strlen(prefix)) != 0) return 0;
	if (strncmp(mode, "EIO", 3) == 0) return EIO;
	if (strncmp(mode, "EROFS", 5) == 0) return EROFS;
	return ENOSPC;
}

#define NEXT(name) static __typeof__(name) *next_##name; \
	if (!next_##name) next_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t count) {
	NEXT(write);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
	NEXT(pwrite);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_pwrite(fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off) {
	NEXT(pwrite64);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_pwrite64(fd, buf, count, off);
}

int fsync(int fd) {
	NEXT(fsync);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_fsync(fd);
}

int fdatasync(int fd) {
	NEXT(fdatasync);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_fdatasync(fd);
}

int ftruncate(int fd, off_t length) {
	NEXT(ftruncate);
	int e = fault_for(fd);
	if (e) { errno = e; return -1; }
	return next_ftruncate(fd, length);
}
