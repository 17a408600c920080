/* softrdma-cfg system enable|disable|status: the opt-in system-wide mode.
 *
 * enable puts softrdma's private library directory into the dynamic
 * linker's configuration (/etc/ld.so.conf.d/00-softrdma.conf, read before
 * the system's own directories) and runs ldconfig, so every program loads
 * softrdma's libibverbs.so.1 and librdmacm.so.1 without softrdma-run;
 * disable removes the file and runs ldconfig again.  enable refuses while
 * the kernel has RDMA devices (rdma-core's providers drive those: taking
 * libibverbs.so.1 away from them would hide real hardware, or kernel
 * rxe/siw devices) unless --force. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/cfg.h"

#define SR_LDSO_CONF "/etc/ld.so.conf.d/00-softrdma.conf"
#define SR_LDSO_MARK "# softrdma system-wide mode (softrdma-cfg system enable)"

/* softrdma's private library directory, from where this program is. */
static int own_libdir(char *out, size_t len)
{
	static const char *const rel[] = {
		"/../lib/softrdma",	  /* build tree: build/bin -> build/lib/softrdma */
		"/" SR_REL_BIN_TO_PKGLIB, /* installed: bindir -> <libdir>/softrdma */
	};
	char exe[PATH_MAX], try[PATH_MAX + 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -errno;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(try, sizeof(try), "%s%s/libibverbs.so.1", exe, rel[i]);
		if (!access(try, R_OK)) {
			*strrchr(try, '/') = 0;
			if (!realpath(try, out) || strlen(out) >= len)
				return -ENAMETOOLONG;
			return 0;
		}
	}
	return -ENOENT;
}

/* Kernel RDMA devices (names, space separated) into buf; their count. */
static int kernel_rdma_devices(char *buf, size_t len)
{
	static const char *const dirs[] = { "/sys/class/infiniband", "/dev/infiniband" };
	int n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *de;

		if (!d)
			continue;
		while ((de = readdir(d))) {
			size_t l = strlen(buf);

			if (de->d_name[0] == '.')
				continue;
			/* /dev/infiniband: the uverbs nodes are what providers open */
			if (i == 1 && strncmp(de->d_name, "uverbs", 6))
				continue;
			snprintf(buf + l, len - l, "%s%s/%s", l ? " " : "", dirs[i], de->d_name);
			n++;
		}
		closedir(d);
	}
	return n;
}

static int run_ldconfig(void)
{
	const char *paths[] = { "/sbin/ldconfig", "/usr/sbin/ldconfig" };
	int status;
	pid_t pid;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (access(paths[i], X_OK))
			continue;
		pid = fork();
		if (pid < 0)
			return -errno;
		if (!pid) {
			execl(paths[i], "ldconfig", (char *)NULL);
			_exit(127);
		}
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				return -errno;
		return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -EIO;
	}
	return -ENOENT;
}

static bool enabled(char *dir, size_t len)
{
	FILE *f = fopen(SR_LDSO_CONF, "re");
	char line[PATH_MAX + 2];
	bool ours = false;

	if (!f)
		return false;
	dir[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, SR_LDSO_MARK))
			ours = true;
		else if (line[0] == '/')
			snprintf(dir, len, "%.*s", (int)len - 1, line);
	}
	fclose(f);
	return ours;
}

static int system_enable(bool force)
{
	char libdir[PATH_MAX], devs[1024], tmp[sizeof(SR_LDSO_CONF) + 8];
	FILE *f;
	int rc;

	if ((rc = own_libdir(libdir, sizeof(libdir))))
		return fail("cannot find softrdma's library directory next to this program: %s", strerror(-rc));
	if (kernel_rdma_devices(devs, sizeof(devs)) && !force)
		return fail("refusing: this host has kernel RDMA devices (%s); rdma-core's providers drive them, and "
			    "system-wide softrdma would hide them from every program.  Use softrdma-run instead, or "
			    "'system enable --force'",
			    devs);
	if (geteuid())
		return fail("system enable writes %s and runs ldconfig: run it as root", SR_LDSO_CONF);
	snprintf(tmp, sizeof(tmp), "%s.new", SR_LDSO_CONF);
	f = fopen(tmp, "we");
	if (!f)
		return fail("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f,
		"%s\n# every program loads softrdma's libibverbs.so.1 and librdmacm.so.1 from here;\n"
		"# 'softrdma-cfg system disable' removes this file\n%s\n",
		SR_LDSO_MARK, libdir);
	if (fclose(f) || rename(tmp, SR_LDSO_CONF)) {
		unlink(tmp);
		return fail("cannot write %s: %s", SR_LDSO_CONF, strerror(errno));
	}
	if ((rc = run_ldconfig())) {
		unlink(SR_LDSO_CONF);
		run_ldconfig();
		return fail("ldconfig failed (%s); nothing changed", strerror(-rc));
	}
	printf("system-wide softrdma enabled: %s (from %s)\n", SR_LDSO_CONF, libdir);
	return 0;
}

static int system_disable(void)
{
	char dir[PATH_MAX];
	int rc;

	if (access(SR_LDSO_CONF, F_OK)) {
		printf("system-wide softrdma is not enabled\n");
		return 0;
	}
	if (!enabled(dir, sizeof(dir)))
		return fail("%s was not written by softrdma-cfg: leaving it alone", SR_LDSO_CONF);
	if (geteuid())
		return fail("system disable removes %s and runs ldconfig: run it as root", SR_LDSO_CONF);
	if (unlink(SR_LDSO_CONF))
		return fail("cannot remove %s: %s", SR_LDSO_CONF, strerror(errno));
	if ((rc = run_ldconfig()))
		return fail("removed %s, but ldconfig failed (%s): run ldconfig", SR_LDSO_CONF, strerror(-rc));
	printf("system-wide softrdma disabled\n");
	return 0;
}

static int system_status(void)
{
	char dir[PATH_MAX], devs[1024];

	if (enabled(dir, sizeof(dir)))
		printf("system-wide softrdma: enabled (%s: %s)\n", SR_LDSO_CONF, dir);
	else
		printf("system-wide softrdma: disabled\n");
	if (kernel_rdma_devices(devs, sizeof(devs)))
		printf("kernel RDMA devices: %s\n", devs);
	else
		printf("kernel RDMA devices: none\n");
	return 0;
}

int cmd_system(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "status"))
		return argc > 2 ? bad_args("usage: system status") : system_status();
	if (!strcmp(argv[1], "enable")) {
		if (argc == 2)
			return system_enable(false);
		if (argc == 3 && !strcmp(argv[2], "--force"))
			return system_enable(true);
		return bad_args("usage: system enable [--force]");
	}
	if (!strcmp(argv[1], "disable"))
		return argc == 2 ? system_disable() : bad_args("usage: system disable");
	return bad_args("system: unknown command '%s' (enable, disable, status)", argv[1]);
}
