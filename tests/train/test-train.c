/* SPDX-License-Identifier: MIT */
/*
 * test-train: infeed-train end to end, against the real infeedd on a
 * private socket: training and evaluation through the daemon, the
 * data-loading experiment, synthetic data, the schedule command, the
 * profile files, and the refusals users will meet first.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"

/* Small datasets shaped like Fashion-MNIST and the tutorial's images. */
static const char *datasets =
    "[dataset fm-train]\n"
    "type = synthetic\nsamples = 1400\nshape = 1,28,28\ndtype = uint8\n"
    "classes = 10\nseed = 1\n"
    "[dataset fm-test]\n"
    "type = synthetic\nsamples = 300\nshape = 1,28,28\ndtype = uint8\n"
    "classes = 10\nseed = 2\n"
    "[dataset tut]\n"
    "type = synthetic\nsamples = 400\nshape = 1,128,128\n"
    "dtype = float32\nclasses = 10\nseed = 3\n";

static char out[1 << 16], errout[1 << 16];

/* An ImageFolder tree of two classes from tests/images' JPEGs. */
static void make_images(char *extra, size_t len)
{
	static const char *const files[] = { "j420-even.jpg", "j420-odd.jpg",
	    "j444-odd.jpg", "jprog-odd.jpg", "jgrey-odd.jpg", "jcmyk.jpg" };
	const char *fixtures = getenv("IMAGE_FIXTURES");
	char from[600], to[600];

	ck_assert_msg(fixtures != NULL, "set IMAGE_FIXTURES to tests/images");
	for (int c = 0; c < 2; c++) {
		snprintf(to, sizeof(to), "%s/imgs", dir);
		mkdir(to, 0755);
		snprintf(to, sizeof(to), "%s/imgs/%c", dir, 'a' + c);
		ck_assert_int_eq(mkdir(to, 0755), 0);
		for (int i = 0; i < 3; i++) {
			snprintf(from, sizeof(from), "%s/%s", fixtures,
			    files[c * 3 + i]);
			snprintf(to, sizeof(to), "%s/imgs/%c/%d.jpg", dir,
			    'a' + c, i);
			ck_assert_int_eq(symlink(from, to), 0);
		}
	}
	/* The tree links the fixtures, outside root: a symlink farm. */
	snprintf(extra, len, "%s[dataset imgs]\ntype = imagefolder\n"
	    "root = %s/imgs\nfollow_symlinks = all\n", datasets, dir);
}

static void train_setup(void)
{
	char extra[2048];

	make_files(datasets);
	make_images(extra, sizeof(extra));
	make_config(extra);
	infeedd_start(NULL);
}

/* Read a whole small file into @buf. */
static void slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

/* Run infeed-train with @args (NULL-terminated); its exit status, with
 * stdout in out[] and stderr in errout[]. */
static int run(const char *const args[])
{
	const char *bin = getenv("INFEED_TRAIN");
	char po[400], pe[400];
	const char *argv[64];
	int n = 0, status;
	pid_t pid;

	ck_assert_msg(bin != NULL, "set INFEED_TRAIN to the binary");
	argv[n++] = bin;
	for (int i = 0; args[i] != NULL && n < 62; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(po, sizeof(po), "%s/stdout", dir);
	snprintf(pe, sizeof(pe), "%s/stderr", dir);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	slurp(po, out, sizeof(out));
	slurp(pe, errout, sizeof(errout));
	unlink(po);
	unlink(pe);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The last line of out[], which --json makes one JSON object. */
static const char *last_line(void)
{
	size_t n = strlen(out);

	while (n > 0 && out[n - 1] == '\n')
		out[--n] = '\0';
	while (n > 0 && out[n - 1] != '\n')
		n--;
	return out + n;
}

/* The number after "key": in @json; fails the test if missing. */
static double json_num(const char *json, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	ck_assert_msg(p != NULL, "no %s in %s", key, json);
	p += strlen(pat);
	ck_assert_msg(strncmp(p, "null", 4) != 0, "%s is null in %s", key,
		      json);
	return strtod(p, NULL);
}

/* Train two epochs through infeedd, then evaluate every test sample. */
START_TEST(trains_through_infeedd)
{
	const char *json;
	int rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--dataset", "fm-train", "--test-dataset", "fm-test",
	    "--batch-size", "10", "--gradient-accumulation", "7",
	    "--device-iterations", "2", "--epochs", "2",
	    "--test-batch-size", "10", "--test-device-iterations", "7",
	    "--output-mode", "all", "--json", "--quiet", NULL });

	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	json = last_line();
	ck_assert_int_eq(json[0], '{');
	/* 1400 samples in steps of 140: 10 steps an epoch. */
	ck_assert_double_eq(json_num(json, "epochs"), 2);
	ck_assert_double_eq(json_num(json, "items"), 2 * 1400);
	/* The test pass evaluates all 300, the last step being short. */
	ck_assert_double_eq(json_num(json, "test_items"), 300);
	ck_assert(json_num(json, "train_loss") > 0);
	ck_assert(json_num(json, "train_accuracy") >= 0);
	ck_assert(json_num(json, "test_accuracy") >= 0 &&
		  json_num(json, "test_accuracy") <= 1);
	ck_assert(json_num(json, "items_per_s") > 0);
}
END_TEST

/* Every schedule trains through the daemon the same way (the unit tests
 * compare weights; here the data path under another schedule). */
START_TEST(grouped_replicated_through_infeedd)
{
	int rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--dataset", "fm-train", "--test-dataset", "none",
	    "--batch-size", "10", "--gradient-accumulation", "8",
	    "--device-iterations", "1", "--epochs", "1", "--strategy",
	    "grouped", "--stages", "B1+B2,B3+B4", "--replicas", "2",
	    "--optimiser", "sgd", "--lr-schedule", "onecycle",
	    "--learning-rate", "0.05", "--json", "--quiet", NULL });

	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	/* 1400 / 160 = 8 full steps; drop_last for training. */
	ck_assert_double_eq(json_num(last_line(), "items"), 8 * 160);
	ck_assert_double_eq(json_num(last_line(), "learning_rate"), 0.05);
	ck_assert_msg(strstr(last_line(), "\"lr_schedule\":\"onecycle\"") !=
		      NULL, "%s", last_line());
}
END_TEST

/* What users get wrong first is refused with advice. */
START_TEST(refusals_are_advice)
{
	int rc;

	rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--strategy", "grouped", NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "multiple of 8") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--gradient-accumulation", "4", NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "at least 7") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--dataset", "raw", "--batch-size", "2",
	    "--gradient-accumulation", "7", "--device-iterations", "1", NULL });
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(errout, "28 x 28") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--socket", sock_path,
	    "--dataset", "no-such-set", NULL });
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(errout, "no-such-set") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--batch-size", "0", NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "batch-size") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--output-mode", "every-3",
	    NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "divide") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--ipu", "warp_speed=9", NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "peak_flops") != NULL, "%s", errout);

	rc = run((const char *[]){ "train", "--lr-schedule", "step",
	    NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "cosine or onecycle") != NULL, "%s",
		      errout);

	rc = run((const char *[]){ "train", "--momentum", "0.9", NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "--optimiser sgd") != NULL, "%s",
		      errout);

	rc = run((const char *[]){ "train", "--stages", "B2,B1,B3,B4",
	    NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "B1+B2") != NULL, "%s", errout);
}
END_TEST

/* The data-loading experiment: three figures for each replica count. */
START_TEST(dataloading_experiment)
{
	const char *json;
	int rc = run((const char *[]){ "dataloading", "--socket", sock_path,
	    "--dataset", "tut", "--batch-size", "4", "--device-iterations",
	    "5", "--replicas", "1", "--replicas", "2", "--steps", "4",
	    "--json", "--quiet", NULL });

	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	json = last_line();
	ck_assert(json_num(json, "loader_items_per_s") > 0);
	ck_assert(json_num(json, "synthetic_items_per_s") > 0);
	ck_assert(json_num(json, "real_items_per_s") > 0);
	/* A verdict for each replica count (which one depends on timing). */
	ck_assert_msg(strstr(out, "R 1: real data reaches") != NULL &&
	    strstr(out, "R 2: real data reaches") != NULL, "%s", out);
	ck_assert_ptr_nonnull(strstr(json, "\"replicas\":2"));
}
END_TEST

/* The experiment on images: the workers decode and crop, the model takes
 * the pipeline's [3, H, W] rows; a pipeline without float32 CHW is
 * refused with advice. */
START_TEST(dataloading_experiment_on_images)
{
	const char *json;
	int rc = run((const char *[]){ "dataloading", "--socket", sock_path,
	    "--dataset", "imgs", "--transform",
	    "RandomResizedCrop(32), RandomHorizontalFlip(), ToTensor()",
	    "--batch-size", "2", "--device-iterations", "2", "--replicas", "1",
	    "--steps", "4", "--json", "--quiet", NULL });

	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	json = last_line();
	ck_assert(json_num(json, "loader_items_per_s") > 0);
	ck_assert(json_num(json, "real_items_per_s") > 0);
	ck_assert_msg(strstr(out, "ClassificationModel 3x32x32") != NULL, "%s",
	    out);
	rc = run((const char *[]){ "dataloading", "--socket", sock_path,
	    "--dataset", "imgs", "--transform",
	    "RandomResizedCrop(32), PILToTensor()", "--replicas", "1",
	    "--quiet", NULL });
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(errout, "end the pipeline with ToTensor()") !=
	    NULL, "%s", errout);
}
END_TEST

/* --synthetic-data needs no daemon; emulate spends the modelled time;
 * --profile writes a trace and a picture. */
START_TEST(synthetic_emulated_with_profile)
{
	char prof[400], path[500];
	struct stat st;
	const char *json;
	double device, measured;
	int rc;

	snprintf(prof, sizeof(prof), "%s/profile", dir);
	rc = run((const char *[]){ "train", "--synthetic-data", "--mode",
	    "emulate", "--epochs", "1", "--profile", prof, "--json",
	    "--quiet", NULL });
	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	json = last_line();
	/* Nothing was computed, so there is no loss to report. */
	ck_assert_ptr_nonnull(strstr(json, "\"train_loss\":null"));
	device = json_num(json, "device_items_per_s");
	measured = json_num(json, "items_per_s");
	/* The run goes no faster than the simulated device. */
	ck_assert_msg(measured <= device * 1.02, "%g > %g", measured, device);
	snprintf(path, sizeof(path), "%s/train.json", prof);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(st.st_size > 100);
	snprintf(path, sizeof(path), "%s/train.svg", prof);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(st.st_size > 100);
	unlink(path);
	snprintf(path, sizeof(path), "%s/train.json", prof);
	unlink(path);
	rmdir(prof);
}
END_TEST

/* The schedule command prints the reference totals. */
START_TEST(schedule_command_prints_the_reference_totals)
{
	const char *json;
	int rc = run((const char *[]){ "schedule", "--stages", "4",
	    "--gradient-accumulation", "8", "--schedule", "pipelined",
	    "--json", NULL });

	ck_assert_msg(rc == 0, "exit %d: %s", rc, errout);
	json = last_line();
	ck_assert_double_eq(json_num(json, "slots"), 14);
	ck_assert_double_eq_tol(json_num(json, "bubble_fraction"), 3.0 / 11,
				1e-6);
	ck_assert_ptr_nonnull(strstr(json, "\"peak_stashed\":[7,5,3,1]"));

	rc = run((const char *[]){ "schedule", "--stages", "4",
	    "--gradient-accumulation", "6", "--schedule", "interleaved",
	    NULL });
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(errout, "multiple of 4") != NULL, "%s", errout);
}
END_TEST

static Suite *train_suite(void)
{
	Suite *s = suite_create("train");
	TCase *tc = tcase_create("train");

	tcase_add_checked_fixture(tc, train_setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, trains_through_infeedd);
	tcase_add_test(tc, grouped_replicated_through_infeedd);
	tcase_add_test(tc, refusals_are_advice);
	tcase_add_test(tc, dataloading_experiment);
	tcase_add_test(tc, dataloading_experiment_on_images);
	tcase_add_test(tc, synthetic_emulated_with_profile);
	tcase_add_test(tc, schedule_command_prints_the_reference_totals);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(train_suite());
}
