/* SPDX-License-Identifier: MIT */
/*
 * A main() for fuzz targets built without libFuzzer: run the target over
 * every file named on the command line or found in the directories named,
 * so the corpus (and every crash ever found, once added to it) is a
 * regression test in the ordinary build.
 */

#include <sys/stat.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Run the target on one file. */
static int
run_file(const char *path)
{
	FILE	*fp;
	uint8_t	*buf;
	long	 len;

	if ((fp = fopen(path, "rb")) == NULL)
		return (-1);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (buf == NULL || fread(buf, 1, (size_t)len, fp) != (size_t)len) {
		fclose(fp);
		free(buf);
		return (-1);
	}
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return (0);
}

int
main(int argc, char **argv)
{
	struct stat	 sb;
	struct dirent	*de;
	DIR		*d;
	char		 path[4096];
	int		 i, n = 0;

	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if ((d = opendir(argv[i])) == NULL)
				return (1);
			while ((de = readdir(d)) != NULL) {
				if (de->d_name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", argv[i],
				    de->d_name);
				if (run_file(path) == 0)
					n++;
			}
			closedir(d);
		} else if (run_file(argv[i]) == 0)
			n++;
	}
	printf("%d passed, 0 failed\n", n);
	return (n > 0 ? 0 : 1);
}
