/* SPDX-License-Identifier: MIT */
/*
 * dump-steps: print the steps libinfeed gives for some loader options, one
 * line per step ("EPOCH STEP INDEX,INDEX,..."), so that other clients (the
 * Python package's tests) can be compared with the C client.
 */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infeed.h"

static void
usage(void)
{
	fprintf(stderr, "usage: dump-steps --socket PATH --dataset NAME "
	    "[--batch-size B] [--device-iterations D] [--replicas R] "
	    "[--shuffle] [--seed S] [--epochs E] [--process ID,COUNT]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "dataset", required_argument, NULL, 'd' },
		{ "batch-size", required_argument, NULL, 'b' },
		{ "device-iterations", required_argument, NULL, 'i' },
		{ "replicas", required_argument, NULL, 'r' },
		{ "shuffle", no_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'e' },
		{ "epochs", required_argument, NULL, 'E' },
		{ "process", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 }
	};
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	const char		*sock = NULL, *dataset = NULL;
	unsigned		 epochs = 1, done = 0, id, count;
	uint64_t		 r;
	int			 c, rc;

	infeed_options_init(&o);
	o.load_indefinitely = false;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'S': sock = optarg; break;
		case 'd': dataset = optarg; break;
		case 'b': o.batch_size = (uint32_t)atoi(optarg); break;
		case 'i': o.device_iterations = (uint32_t)atoi(optarg); break;
		case 'r': o.replication_factor = (uint32_t)atoi(optarg); break;
		case 's': o.shuffle = true; break;
		case 'e': o.seed = strtoull(optarg, NULL, 10); break;
		case 'E': epochs = (unsigned)atoi(optarg); break;
		case 'p':
			if (sscanf(optarg, "%u,%u", &id, &count) != 2)
				usage();
			o.distributed_process_id = id;
			o.distributed_process_count = count;
			break;
		default: usage();
		}
	}
	if (sock == NULL || dataset == NULL || (f = infeed_new()) == NULL)
		usage();
	if (infeed_connect(f, sock, "dump-steps") != INFEED_OK ||
	    infeed_attach(f, dataset, &o, NULL) != INFEED_OK) {
		fprintf(stderr, "dump-steps: %s\n", infeed_error(f));
		return (1);
	}
	while (done < epochs) {
		if ((rc = infeed_next(f, &st)) == INFEED_END_OF_DATA) {
			done++;
			continue;
		}
		if (rc != INFEED_OK) {
			fprintf(stderr, "dump-steps: %s\n", infeed_error(f));
			return (1);
		}
		printf("%llu %llu ", (unsigned long long)st.epoch,
		    (unsigned long long)st.step);
		for (r = 0; r < st.rows; r++)
			printf("%s%llu", r ? "," : "",
			    (unsigned long long)st.indices[r]);
		printf("\n");
		infeed_release(f, &st);
	}
	infeed_free(f);
	return (0);
}
