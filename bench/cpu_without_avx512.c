/* A process that sees its CPU without AVX-512: loaded with LD_PRELOAD (see
 * bench/as_avx2_cpu.sh), it turns on Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID)
 * before the program starts, and answers each CPUID instruction from a SIGSEGV handler
 * with the CPU's own answer, less the AVX-512, AMX and AVX-VNNI feature bits of leaf 7.
 *
 * Every library in the process then dispatches as on an AVX2 CPU of the same model:
 * convlab, PyTorch's oneDNN, ONNX Runtime's MLAS, OpenBLAS, NumPy. The bench uses it to
 * compare convlab with its peers at the avx2 level on a machine that has AVX-512, where
 * CONVLAB_MAX_CPU_ISA caps convlab alone and ONNX Runtime has no switch of its own.
 *
 * Linux on x86-64 only, and only where the CPU (or the hypervisor) offers CPUID faulting
 * (the "cpuid_fault" flag in /proc/cpuinfo); the constructor exits with status 111
 * otherwise, so no run silently keeps AVX-512. The setting is per thread and inherited
 * by threads and processes started later; execve clears it. A program that installs its
 * own SIGSEGV handler (Python's faulthandler, for one) would take the faults itself. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

/* leaf 7, subleaf 0 */
#define EBX_HIDDEN (1u << 16 | 1u << 17 | 1u << 21 | 1u << 26 | 1u << 27 | 1u << 28 \
                    | 1u << 30 | 1u << 31)  /* F DQ IFMA PF ER CD BW VL */
#define ECX_HIDDEN (1u << 1 | 1u << 6 | 1u << 11 | 1u << 12 | 1u << 14)
                   /* VBMI VBMI2 VNNI BITALG VPOPCNTDQ */
#define EDX_HIDDEN (1u << 2 | 1u << 3 | 1u << 8 | 1u << 22 | 1u << 23 | 1u << 24 \
                    | 1u << 25)  /* 4VNNIW 4FMAPS VP2INTERSECT AMX-BF16 FP16 AMX-TILE AMX-INT8 */
/* leaf 7, subleaf 1 */
#define EAX1_HIDDEN (1u << 4 | 1u << 5)  /* AVX-VNNI AVX512-BF16 */

static void cpuid_unmasked(unsigned leaf, unsigned subleaf, unsigned r[4])
{
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

static void on_fault(int sig, siginfo_t *info, void *context)
{
    ucontext_t *uc = context;
    greg_t *regs = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
    /* A faulting CPUID arrives as a kernel-sent SIGSEGV at the instruction (0F A2). */
    if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
        signal(sig, SIG_DFL);  /* any other fault: let it happen again, unhandled */
        return;
    }
    unsigned leaf = (unsigned)regs[REG_RAX], subleaf = (unsigned)regs[REG_RCX], r[4];
    cpuid_unmasked(leaf, subleaf, r);
    if (leaf == 7 && subleaf == 0) {
        r[1] &= ~EBX_HIDDEN;
        r[2] &= ~ECX_HIDDEN;
        r[3] &= ~EDX_HIDDEN;
    } else if (leaf == 7 && subleaf == 1) {
        r[0] &= ~EAX1_HIDDEN;
    }
    regs[REG_RAX] = r[0];
    regs[REG_RBX] = r[1];
    regs[REG_RCX] = r[2];
    regs[REG_RDX] = r[3];
    regs[REG_RIP] += 2;
}

__attribute__((constructor)) static void hide_avx512(void)
{
    struct sigaction action = {0};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, NULL) != 0
        || syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        perror("cpu_without_avx512: CPUID faulting is not available");
        _exit(111);
    }
}
