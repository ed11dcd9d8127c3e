! counter - examples/cmake/counter.c in Fortran, built when the project finds a Fortran
! compiler: the same totals, so it prints the same line.
!
!   counter_f [STEPS [US_PER_STEP]]
!
! The loop is a do while on the protected step: a counted do loop fixes its trip count
! when it starts, and restoring its variable would not resume it.
program counter
    use mpi
    use shoal
    use, intrinsic :: iso_c_binding, only: c_int
    implicit none

    interface
        integer(c_int) function usleep(us) bind(c, name="usleep")
            import :: c_int
            integer(c_int), value :: us
        end function usleep
    end interface

    integer, target :: step
    integer(8), target :: total
    integer(8) :: mine, total_step
    integer :: rank, nranks, ierr, steps, pace
    logical :: restarted
    character(len=16) :: arg

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    steps = 1000
    pace = 1000
    if (command_argument_count() >= 1) then
        call get_command_argument(1, arg)
        read (arg, *) steps
    end if
    if (command_argument_count() >= 2) then
        call get_command_argument(2, arg)
        read (arg, *) pace
    end if

    call shoal_init(MPI_COMM_WORLD)
    restarted = shoal_status() == 1
    step = 0
    total = 0
    call shoal_protect(0, step)
    call shoal_protect(1, total)
    do while (step < steps)
        call shoal_snapshot()
        if (restarted .and. rank == 0) write (*, '("counter: resumed at step ", i0)') step
        restarted = .false.
        mine = rank + 1
        call MPI_Allreduce(mine, total_step, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
        total = total + total_step
        ierr = usleep(int(pace, c_int))
        step = step + 1
    end do
    if (rank == 0) write (*, '("counter: total ", i0, " after ", i0, " steps on ", i0, " ranks")') &
        total, steps, nranks
    call shoal_finalize()
    call MPI_Finalize(ierr)
end program counter
