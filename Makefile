# ldct-node build: `make` builds build/ldctd and build/ldct; `make run` runs
# the daemon on its embedded defaults; `make test` runs unit and integration
# tests; `make lint` checks formatting and runs cppcheck; `make bundle`
# packs binaries and their non-system libraries for the GPU machine;
# `make install` installs the daemon, the CLI, the systemd unit and its
# sysusers/tmpfiles entries, the example configuration (kept if present)
# and the documentation under DESTDIR/PREFIX (default /usr, /etc).
# CUDA sources in gpu/ are compiled whenever nvcc is found (WITH_CUDA=0 to
# skip); CUDA_ARCH selects the targets (default sm_90 plus PTX).

BUILD ?= build
CC ?= gcc
CXX ?= g++
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
WITH_CUDA ?= $(if $(NVCC),1,0)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

DEB_PKGS := dcmtk libdcmtk-dev libuv1-dev libsqlite3-dev check libinih-dev libsystemd-dev \
	libmicrohttpd-dev libfftw3-dev libpng-dev pkg-config dicom3tools orthanc sqlite3 curl \
	clang-format cppcheck socat systemd python3 openssl libssl-dev

WARN := -Wall -Wextra -Werror
CPPFLAGS := -I. -D_GNU_SOURCE -DLDCT_WITH_CUDA=$(WITH_CUDA) -MMD -MP
CFLAGS := -std=c11 -O2 -g -fopenmp $(WARN) -Wshadow -Wstrict-prototypes -Wno-format-truncation
CXXFLAGS := -std=c++17 -O2 -g $(WARN) -Wno-deprecated-declarations -Wno-format-truncation
NVFLAGS := -std=c++17 -O3 -lineinfo $(CUDA_ARCH) -I. -DLDCT_WITH_CUDA=1 \
	-Xcompiler -Wall,-Wextra,-fopenmp --Werror all-warnings

DCMTK_LIBS := -ldcmnet -ldcmtls -ldcmjpeg -ldcmjpls -ldcmimage -ldcmimgle -ldcmdata \
	-lijg8 -lijg12 -lijg16 -ldcmtkcharls -loflog -lofstd -lssl -lcrypto -lz
SYS_LIBS := -luv -lsqlite3 -linih -lsystemd -lmicrohttpd -lfftw3f -lfftw3f_omp -lpng -lpthread -lm
ifeq ($(WITH_CUDA),1)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcufft -lcudart_static -ldl -lrt
endif

mod_c = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(1)/*.c))
COMMON_OBJ := $(call mod_c,common)
CONFIG_OBJ := $(call mod_c,config)
DB_OBJ := $(call mod_c,db)
PIPELINE_OBJ := $(call mod_c,pipeline)
SCP_OBJ := $(patsubst %.cc,$(BUILD)/obj/%.o,$(wildcard scp/*.cc))
GPU_OBJ := $(call mod_c,gpu)
ifeq ($(WITH_CUDA),1)
GPU_OBJ += $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard gpu/*.cu))
endif
DAEMON_OBJ := $(filter-out $(BUILD)/obj/daemon/main_%.o,$(call mod_c,daemon))

LIBS_A := $(BUILD)/libdaemon.a $(BUILD)/libpipeline.a $(BUILD)/libscp.a $(BUILD)/libgpu.a \
	$(BUILD)/libdb.a $(BUILD)/libconfig.a $(BUILD)/libcommon.a
LINK = $(CXX) -fopenmp -o $@ $(filter %.o,$^) -Wl,--start-group $(LIBS_A) -Wl,--end-group \
	$(DCMTK_LIBS) $(SYS_LIBS) $(CUDA_LIBS) $(1)

GPU_LIBS_A := $(BUILD)/libgpu.a $(BUILD)/libcommon.a
LINK_GPU = $(CXX) -fopenmp -o $@ $(filter %.o,$^) $(GPU_LIBS_A) $(CUDA_LIBS) -lm -lpthread $(1)
CHECK_LIBS := -lcheck -l:libsubunit.a -lrt -lm -lpthread

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/check_*.c))
TOOLS := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(wildcard tests/tools/*.c))

.PHONY: all deps run test unit integration lint bundle clean install
all: $(BUILD)/ldctd $(BUILD)/ldct $(UNIT_TESTS) $(TOOLS)

deps:
	@missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing" $$missing; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q \
			--no-install-recommends $$missing; \
	fi

$(BUILD)/libcommon.a: $(COMMON_OBJ)
$(BUILD)/libconfig.a: $(CONFIG_OBJ)
$(BUILD)/libdb.a: $(DB_OBJ)
$(BUILD)/libpipeline.a: $(PIPELINE_OBJ)
$(BUILD)/libscp.a: $(SCP_OBJ)
$(BUILD)/libgpu.a: $(GPU_OBJ)
$(BUILD)/libdaemon.a: $(DAEMON_OBJ)
$(BUILD)/lib%.a:
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/ldctd: $(BUILD)/obj/daemon/main_ldctd.o $(LIBS_A)
	$(call LINK)
$(BUILD)/ldct: $(BUILD)/obj/daemon/main_ldct.o $(LIBS_A)
	$(call LINK)
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBS_A)
	@mkdir -p $(@D)
	$(call LINK,$(CHECK_LIBS))
$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIBS_A)
	@mkdir -p $(@D)
	$(call LINK)
# GPU tests and tools link only the compute engine, so they run on the GPU
# machine (which has no DCMTK, libuv, SQLite or Check) without a bundle.
$(BUILD)/tests/check_gpu_%: $(BUILD)/obj/tests/unit/check_gpu_%.o $(GPU_LIBS_A)
	@mkdir -p $(@D)
	$(call LINK_GPU,$(CHECK_LIBS))
$(BUILD)/tests/check_scp: $(BUILD)/obj/tests/unit/throwing_handler.o
ifeq ($(WITH_CUDA),1)
$(BUILD)/tests/check_gpu_device: $(BUILD)/obj/tests/unit/gpu_fault.cu.o
$(BUILD)/tests/check_worker: $(BUILD)/obj/tests/unit/gpu_fault.cu.o
endif
$(BUILD)/tools/gpu_%: $(BUILD)/obj/tests/tools/gpu_%.o $(GPU_LIBS_A)
	@mkdir -p $(@D)
	$(call LINK_GPU)

# CPU emulation of the anlm CUDA kernels (no GPU needed; not part of all).
$(BUILD)/tools/anlm_cuda_emu: tests/tools/anlm_cuda_emu.cc gpu/anlm_kernels.cuh gpu/anlm.h \
		$(GPU_LIBS_A)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -pthread -fopenmp -I. -DLDCT_WITH_CUDA=$(WITH_CUDA) $(WARN) \
		-Wno-unknown-pragmas -o $@ $< $(GPU_LIBS_A) $(CUDA_LIBS) -lm

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c -o $@ $<
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

run: deps all
	$(BUILD)/ldctd

unit: all
	tests/run_unit.sh $(BUILD)

integration: all
	tests/integration/run.sh $(BUILD)

test: deps all
	tests/run_all.sh $(BUILD)

lint:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh')
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem -I. -DLDCT_WITH_CUDA=0 \
		$$(git ls-files '*.c' '*.cc')

bundle: all
	tests/tools/make_bundle.sh $(BUILD)

PREFIX ?= /usr
SYSCONFDIR ?= /etc
DOCDIR ?= $(PREFIX)/share/doc/ldct-node
UNITDIR ?= $(PREFIX)/lib/systemd/system
install: # no prerequisites: it installs what `make` built, never rebuilds (as root)
	@test -x $(BUILD)/ldctd -a -x $(BUILD)/ldct || \
		{ echo "make install: no $(BUILD)/ldctd or $(BUILD)/ldct; run make first" >&2; exit 1; }
	install -D -m 0755 $(BUILD)/ldctd $(DESTDIR)$(PREFIX)/bin/ldctd
	install -D -m 0755 $(BUILD)/ldct $(DESTDIR)$(PREFIX)/bin/ldct
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	sed -e 's#/usr/bin/#$(PREFIX)/bin/#g' -e 's#/etc/ldct/#$(SYSCONFDIR)/ldct/#g' \
		-e 's#/usr/share/doc/ldct-node/#$(DOCDIR)/#g' systemd/ldctd.service \
		> $(DESTDIR)$(UNITDIR)/ldctd.service
	install -D -m 0644 systemd/ldct.sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/ldct.conf
	install -d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	sed 's#/etc/ldct#$(SYSCONFDIR)/ldct#' systemd/ldct.tmpfiles.conf \
		> $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/ldct.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/ldct/ldctd.conf ] || \
		install -D -m 0644 config/ldctd.conf.example $(DESTDIR)$(SYSCONFDIR)/ldct/ldctd.conf
	install -m 0644 README.md config/ldctd.conf.example docs/CONFORMANCE.md docs/QUALITY.md \
		docs/PERFORMANCE.md $(DESTDIR)$(DOCDIR)/

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
