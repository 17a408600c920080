/* libsoftrdma-devnode.so: the device node UCX looks for, for softrdma's
 * devices only.  softrdma-run preloads it.
 *
 * UCX (1.13, and still upstream) lists an ibverbs device only if
 * "/dev/infiniband/" + ibv_device.dev_name stats as a character device the
 * process may read and write (uct_ib_device_is_accessible: stat(),
 * S_ISCHR, access(R_OK | W_OK)); it never opens the node.  A userspace
 * device has no kernel node, and none can be made without root, so the
 * check can only be answered inside the process: when the real stat() or
 * access() of such a path fails and softrdma's libibverbs.so.1, loaded in
 * this process, has a device of that dev_name (uverbsN), the answer is a
 * character device (0:0, mode 0666) instead of ENOENT.  Every other path,
 * and every path that exists, gets the real answer; open() is untouched.
 *
 * The library is asked through dlopen(RTLD_NOLOAD), so a process that has
 * not loaded it (a shell, mpirun) never loads the configuration here. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define DEVNODE_EXPORT __attribute__((visibility("default")))
#define DEVNODE_DIR "/dev/infiniband/"

static bool softrdma_node(const char *path)
{
	if (!path || strncmp(path, DEVNODE_DIR, sizeof(DEVNODE_DIR) - 1))
		return false;
	void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return false;
	int (*exists)(const char *) = (int (*)(const char *))dlvsym(h, "sr_uverbs_node_exists", "SOFTRDMA_PRIVATE_1.0");
	bool ours = exists && exists(path + sizeof(DEVNODE_DIR) - 1);
	dlclose(h);
	return ours;
}

/* The answer for softrdma's node: a character device 0:0, mode 0666. */
#define FILL_STAT(st)                                                                            \
	do {                                                                                     \
		memset((st), 0, sizeof(*(st)));                                                  \
		(st)->st_mode = S_IFCHR | 0666;                                                  \
		(st)->st_nlink = 1;                                                              \
		(st)->st_blksize = 4096;                                                         \
		(st)->st_mtim.tv_sec = (st)->st_atim.tv_sec = (st)->st_ctim.tv_sec = time(NULL); \
	} while (0)

/* The real call first: a node that exists (real hardware beside us) is
 * described as it is, and only a missing one may be softrdma's;
 * real_call is the real call, st the buffer it fills. */
#define STAT_WRAP(real_call, path, st)                                                     \
	({                                                                                 \
		int saved_ = errno, rc_ = (real_call);                                     \
		if (rc_ && (errno == ENOENT || errno == ENOTDIR) && softrdma_node(path)) { \
			FILL_STAT(st);                                                     \
			errno = saved_;                                                    \
			rc_ = 0;                                                           \
		}                                                                          \
		rc_;                                                                       \
	})
#define REAL(name, type) ((type)dlsym(RTLD_NEXT, #name))

DEVNODE_EXPORT int stat(const char *restrict path, struct stat *restrict st)
{
	static int (*real)(const char *restrict, struct stat *restrict);
	if (!real)
		real = REAL(stat, int (*)(const char *restrict, struct stat *restrict));
	return STAT_WRAP(real(path, st), path, st);
}

DEVNODE_EXPORT int stat64(const char *restrict path, struct stat64 *restrict st)
{
	static int (*real)(const char *restrict, struct stat64 *restrict);
	if (!real)
		real = REAL(stat64, int (*)(const char *restrict, struct stat64 *restrict));
	return STAT_WRAP(real(path, st), path, st);
}

/* Binaries built against glibc before 2.33 call stat through these. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);

DEVNODE_EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	static int (*real)(int, const char *, struct stat *);
	if (!real)
		real = REAL(__xstat, int (*)(int, const char *, struct stat *));
	return STAT_WRAP(real ? real(ver, path, st) : stat(path, st), path, st);
}

DEVNODE_EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	static int (*real)(int, const char *, struct stat64 *);
	if (!real)
		real = REAL(__xstat64, int (*)(int, const char *, struct stat64 *));
	return STAT_WRAP(real ? real(ver, path, st) : stat64(path, st), path, st);
}

static int node_access(int mode)
{
	if (mode & X_OK) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

DEVNODE_EXPORT int access(const char *path, int mode)
{
	static int (*real)(const char *, int);
	if (!real)
		real = REAL(access, int (*)(const char *, int));
	int saved = errno, rc = real(path, mode);
	if (rc && (errno == ENOENT || errno == ENOTDIR) && softrdma_node(path)) {
		errno = saved;
		return node_access(mode);
	}
	return rc;
}

DEVNODE_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	static int (*real)(int, const char *, int, int);
	if (!real)
		real = REAL(faccessat, int (*)(int, const char *, int, int));
	int saved = errno, rc = real(dirfd, path, mode, flags);
	if (rc && (errno == ENOENT || errno == ENOTDIR) && softrdma_node(path)) {
		errno = saved;
		return node_access(mode);
	}
	return rc;
}
